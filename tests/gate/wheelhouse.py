"""A local wheelhouse made from what this interpreter has installed, and its hashed lock (for offline nights).

The act tests run offline, so the one night that installs every package from a hashed lock
needs wheels on disk: each installed distribution of the project's dependency closure is
packed back into a wheel (its files as RECORD lists them, a fresh RECORD, the WHEEL tag it was
installed from). The lock is then those wheels' hashes, as ``pytest-specdec gate lock`` writes one.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name

from pytest_specdec.gate.lockfile import Pin, write_pins
from pytest_specdec.hardware import lock_platform


def closure(requirements: list[str]) -> list[str]:
    """The installed distributions ``requirements`` need here (markers evaluated for this interpreter)."""
    found: dict[str, str] = {}
    wanted = [(Requirement(r), "") for r in requirements]
    while wanted:
        requirement, extra = wanted.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        distribution = metadata.distribution(name)
        for chosen in requirement.extras:
            wanted += [(Requirement(r), chosen) for r in distribution.requires or []]
        if name in found:
            continue
        found[name] = distribution.metadata["Name"]
        wanted += [(Requirement(r), "") for r in distribution.requires or []]
    return sorted(found.values())


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(name: str, folder: Path) -> Path:
    """``name``'s installed files as a wheel in ``folder``."""
    distribution = metadata.distribution(name)
    info = next(p for p in distribution.files or [] if p.parts[0].endswith(".dist-info")).parts[0]
    here = {str(tag) for tag in sys_tags()}
    tags = [line.split(":", 1)[1].strip() for line in (distribution.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag:")]  # fmt: skip
    tag = next(t for t in tags if t in here)  # py2-none-any first in tzdata's WHEEL: the one this Python takes
    stem = f"{canonicalize_name(name).replace('-', '_')}-{distribution.version}"
    wheel = folder / f"{stem}-{tag}.whl"
    skipped = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for path in distribution.files or []:
            if path.parts[0] == ".." or "__pycache__" in path.parts or (path.parts[0] == info and path.name in skipped):
                continue
            data = Path(str(distribution.locate_file(path))).read_bytes()
            archive.writestr(path.as_posix(), data)
            record.append(f"{path.as_posix()},sha256={_digest(data)},{len(data)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def wheelhouse(requirements: list[str], folder: Path, lock: Path) -> dict[str, Pin]:
    """Pack the closure of ``requirements`` into ``folder`` and write their hashed lock to ``lock``."""
    folder.mkdir(parents=True, exist_ok=True)
    pins = {}
    for name in closure(requirements):
        wheel = repack(name, folder)
        pins[name.lower()] = Pin(name, metadata.version(name), (hashlib.sha256(wheel.read_bytes()).hexdigest(),))
    write_pins(lock, pins, lock_platform())
    return pins
