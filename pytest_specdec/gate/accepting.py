"""The accept pull request of a night: its candidates merged into ``baselines/``, its environment locked.

Runs in the alert job on the artifact of each leg: ``candidates.json`` (the results
that had no accepted baseline) is validated as a baseline file of its machine class
and backend and merged into the accepted file, and the leg's ``gate-lock.txt`` (every
package of the environment that ran, with its hash) is validated and merged into the
machine class's lock. A maintainer reviews and merges the pull request; nothing is
accepted without one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.lockfile import pin_name, platform_of, read_pins, write_pins
from pytest_specdec.gate.releases import lock_path
from pytest_specdec.store.baselines import BaselineStore, load_any
from pytest_specdec.store.ledger import newer_kept

CANDIDATES = "candidates.json"


def accept_from_artifacts(artifacts: Path, baselines: Path) -> tuple[list[str], set[str]]:
    """Merge every leg's candidates and lock; what was done, one line each, and the machine classes accepted."""
    lines: list[str] = []
    machines: set[str] = set()
    for candidates in sorted(artifacts.glob(f"*/{CANDIDATES}")):
        try:  # both files are checked before either is used: a leg is accepted whole or not at all
            found = load_any(candidates)
            ran = read_pins(candidates.parent / "gate-lock.txt")
        except SpecdecUsageError as error:
            lines.append(f"refused: {error}")
            continue
        if not found.entries:
            continue
        store = BaselineStore(baselines, found.machine_class)
        written = store.write(found.backend, dict(found.entries))
        machines.add(found.machine_class)
        lines.append(
            f"accepted {len(found.entries)} candidate(s) of {found.machine_class}/{found.backend}: "
            + (f"wrote {written}" if written else "already accepted")
        )
        lines += newer_kept(store.kept_newer)
        if ran:
            lock = lock_path(baselines, found.machine_class)
            platform = platform_of(candidates.parent / "gate-lock.txt")
            with store.locked():  # read, merge, write: two accepting runs at once keep both legs' pins
                kept = read_pins(lock) if platform_of(lock) in ("", platform) else {}  # another platform's: replaced
                builds = {pin_name(pin.name) for pin in kept.values() if pin.build}  # keeps '# build'
                marked = {
                    name: replace(pin, build=pin.build or pin_name(pin.name) in builds) for name, pin in ran.items()
                }
                write_pins(lock, kept | marked, platform)
            lines.append(f"locked {len(ran)} package(s) with their hashes in {lock}")
    return lines or ["no candidates tonight: nothing to accept"], machines
