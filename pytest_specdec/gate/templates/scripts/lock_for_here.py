"""Which hashed lock set-up installs on this runner, decided before anything is installed (standard library only).

Prints the lock's path (nothing when there is none) and says on stderr why that one:
``baselines/<machine class>/gate-lock.txt`` when its ``# platform:`` line is this
interpreter's platform (or it has none: a lock written on this machine class); else another
machine class's lock for the same platform (the shipped one for macOS arm64 and Python 3.12,
on a first night); else none, and the upgrade step resolves tonight's releases. The machine
class comes from pytest-specdec's hardware.py, read by path (importing the package would need
what is not installed yet): the checkout's ``pytest_specdec/hardware.py`` in pytest-specdec's own
repository, else ``specdec_hardware.py`` beside this script, which ``pytest-specdec gate init``
writes from the wheel in any other repository.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

LOCK_NAME = "gate-lock.txt"
COPY = "specdec_hardware.py"  # pytest_specdec/hardware.py as the wheel has it, outside pytest-specdec's own repository


def hardware() -> ModuleType:
    """pytest_specdec/hardware.py (standard library only), loaded by path."""
    here = Path(__file__).absolute()  # not resolved: in pytest-specdec's own checkout .github/scripts links here
    found = [p for p in (here.parents[2] / "pytest_specdec" / "hardware.py", here.with_name(COPY)) if p.is_file()]
    if not found:
        raise SystemExit(f"gate.sh: no {COPY} beside {here.name} — run 'pytest-specdec gate init --workflows'")
    path = found[0]
    spec = importlib.util.spec_from_file_location("specdec_hardware", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"gate.sh: cannot read {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def platform_of(lock: Path) -> str:  # pytest_specdec.gate.lockfile's, which cannot be imported yet
    """The lock's ``# platform:`` line (``""``: none, a lock written by ``pytest-specdec gate lock`` before it had one)."""
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line.startswith("# platform:"):
            return line.removeprefix("# platform:").strip()
    return ""


def choose(baselines: Path, machine: str, here: str) -> tuple[Path | None, str]:
    """The lock and the line that says why."""
    own = baselines / machine / LOCK_NAME
    if own.is_file() and platform_of(own) in ("", here):
        return own, f"{own}: this machine class's lock"
    same = sorted(p for p in baselines.glob(f"*/{LOCK_NAME}") if p != own and platform_of(p) == here)
    if same:
        return same[0], (
            f"{same[0]}: no lock of {machine}'s own for {here} yet, so another machine class's lock for the same "
            "platform (accept a night to pin this machine's own)"
        )
    return None, (
        f"no hashed lock for {machine} on {here} under {baselines}: the upgrade step resolves tonight's releases "
        "(a first night; accept it to pin them)"
    )


def pinned_twice(lock: Path) -> str:
    """The first package the lock pins on two lines (names as pip compares them), or ``""``."""
    seen: set[str] = set()
    for line in lock.read_text(encoding="utf-8").splitlines():
        name = line.split("==", 1)[0].strip().lower().replace("_", "-").replace(".", "-")
        if not name or name.startswith("#") or "==" not in line:
            continue
        if name in seen:
            return name
        seen.add(name)
    return ""


if __name__ == "__main__":
    found, why = choose(Path(sys.argv[1] if len(sys.argv) > 1 else "baselines"), hardware().machine_class(),
                        hardware().lock_platform())  # fmt: skip
    twice = pinned_twice(found) if found else ""
    if twice:  # refused before set-up installs anything: pip would stop on it, in its own words, half-way
        raise SystemExit(f"gate.sh: {found} pins {twice} twice — keep one line per package (the accept pull request "
                         "writes it whole)")  # fmt: skip
    sys.stderr.write(f"gate.sh: {why}\n")
    print(found or "")
