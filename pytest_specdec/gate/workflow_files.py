"""The gate's workflows and scripts, shipped in the wheel and written into the repository that uses them.

``pytest-specdec gate init --write`` (or ``--workflows``, to refresh them after an upgrade) copies
each file of ``templates/`` to the same place under the repository: the four workflows to
``.github/workflows/`` and ``gate.sh`` with ``lock_for_here.py`` to ``.github/scripts/``. They read
everything repository-specific at run time (``[tool.specdec.gate]``, the baselines, the locks), so
the files are the same in every repository. This project's own ``.github/scripts/`` are links to
the templates, and its workflows the same bytes (GitHub reads no linked workflow; a test compares
them), so there is one copy to change: the template. Outside this
project a copy of the wheel's ``hardware.py`` goes beside the scripts too (see
:func:`machine_class_reader`).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from pytest_specdec.store.files import write_atomically

# Where each shipped file goes, relative to the repository's root.
PLACES = {"workflows": Path(".github/workflows"), "scripts": Path(".github/scripts")}
EXECUTABLE = 0o755
HARDWARE_COPY = "specdec_hardware.py"  # lock_for_here.py's COPY


def shipped() -> dict[Path, Traversable]:
    """Each shipped file by the path it takes in a repository.

    >>> sorted(p.name for p in shipped())  # doctest: +NORMALIZE_WHITESPACE
    ['gate.sh', 'lock_for_here.py', 'specdec-accept.yml', 'specdec-gate-runner.yml', 'specdec-gate.yml',
     'specdec-watchdog.yml']
    """
    templates = files("pytest_specdec.gate") / "templates"
    return {
        PLACES[folder] / item.name: item
        for folder in sorted(PLACES)
        for item in sorted((templates / folder).iterdir(), key=lambda t: t.name)
        if item.is_file() and not item.name.startswith(".")
    }


def machine_class_reader(root: Path) -> dict[Path, Traversable]:
    """``lock_for_here.py`` reads the machine class before anything is installed, from pytest-specdec's
    ``hardware.py`` by path: the checkout's own in pytest-specdec's repository, else a copy of the wheel's."""
    if (root / "pytest_specdec" / "hardware.py").is_file():
        return {}
    return {PLACES["scripts"] / HARDWARE_COPY: files("pytest_specdec") / "hardware.py"}


@dataclass(frozen=True)
class Written:
    """What writing the gate's files did, file by file (paths relative to the repository)."""

    written: tuple[Path, ...] = ()
    unchanged: tuple[Path, ...] = ()
    kept: tuple[Path, ...] = ()  # differs from the shipped file and was not replaced

    def lines(self) -> list[str]:
        """One line per kind of outcome, for the command's output."""
        said = [f"wrote {', '.join(map(str, self.written))}"] if self.written else []
        said += [f"{len(self.unchanged)} file(s) already as shipped"] if self.unchanged else []
        said += [f"kept {path}: it differs from this pytest-specdec's — 'pytest-specdec gate init --workflows' "
                 "replaces it (git keeps yours)" for path in self.kept]  # fmt: skip
        return said


def write_gate_files(root: Path, replace: bool) -> Written:
    """Write every shipped file under ``root``: a missing one always, a differing one only when ``replace``;
    scripts are made executable."""
    written: list[Path] = []
    unchanged: list[Path] = []
    kept: list[Path] = []
    for relative, source in {**shipped(), **machine_class_reader(root)}.items():
        text = source.read_text(encoding="utf-8")
        target = root / relative
        current = target.read_text(encoding="utf-8") if target.is_file() else None
        if current == text:
            unchanged.append(relative)
            continue
        if current is not None and not replace:
            kept.append(relative)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, text)
        if relative.parent == PLACES["scripts"]:
            target.chmod(EXECUTABLE)
        written.append(relative)
    return Written(tuple(written), tuple(unchanged), tuple(kept))
