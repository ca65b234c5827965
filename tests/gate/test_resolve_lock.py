"""``pytest-specdec gate resolve``: a user's repository gets hashed locks with pytest-specdec in them.

Offline: pip resolves from a folder of wheels packed from this interpreter's own packages (for this
interpreter's platform), and pytest-specdec is pinned by the hash of a wheel built from this checkout,
as a user does before it is on PyPI. The lock then installs with ``--require-hashes`` and nothing else.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from pytest_specdec.gate.lockfile import Pin, environment_pins, read_pins
from pytest_specdec.hardware import lock_platform

from .wheelhouse import closure, repack, wheelhouse

REPO = Path(__file__).resolve().parents[2]
APP = """[project]
name = "myapp"
version = "0.1"
dependencies = ["tabulate>=0.9"]

[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"
"""


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A folder of wheels (pytest-specdec's closure, httpx, setuptools) and pytest-specdec's own wheel."""
    root = tmp_path_factory.mktemp("index")
    packed = [name for name in closure(["pytest-specdec", "httpx"]) if canonicalize_name(name) != "pytest-specdec"]
    wheelhouse([*packed, "setuptools"], root / "wheels", root / "unused-lock.txt")  # pytest-specdec: its own wheel
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(root / "dist"), str(REPO)], check=True, capture_output=True)  # fmt: skip
    (wheel,) = (root / "dist").glob("pytest_specdec-*.whl")
    return root / "wheels", wheel


def resolve(app: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest_specdec.cli", "gate", "resolve", *args]
    return subprocess.run(command, cwd=app, capture_output=True, text=True, check=False)


def an_app(tmp_path: Path) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text(APP, encoding="utf-8")
    return app


def test_the_hosted_jobs_lock_pins_pytest_specdec_by_its_wheel_and_installs_with_hashes_alone(
    tmp_path: Path, index: tuple[Path, Path]
) -> None:
    wheels, wheel = index
    app = an_app(tmp_path)
    done = resolve(app, "--for", "alert", "--specdec-wheel", str(wheel), "--find-links", str(wheels),
                   "--out", ".github/alert-lock.txt")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lock = app / ".github" / "alert-lock.txt"
    pins = read_pins(lock)
    assert pins["pytest-specdec"].hashes == (hashlib.sha256(wheel.read_bytes()).hexdigest(),)
    assert {"httpx", "scipy", "pytest"} <= set(pins), "its dependencies and the webhook's client"
    assert "tabulate" in pins, "pytest-specdec's own dependency"
    assert "myapp" not in pins, "the hosted jobs install pytest-specdec, never the app"
    text = lock.read_text(encoding="utf-8")
    assert text.startswith(f"# platform: {lock_platform()}\n")
    needs = {n.strip() for line in text.splitlines() if line.startswith("#   requires: ")
             for n in line.removeprefix("#   requires: ").split(",")} - {"nothing"}  # fmt: skip
    assert needs <= set(pins), "closed: everything a pin needs is pinned"
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--require-hashes", "--no-deps", "--no-index", "--find-links",
         str(wheels), "--find-links", str(wheel.parent), "--target", str(target), "-r", str(lock)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-2000:]
    assert (target / "pytest_specdec" / "gate" / "resolve_lock.py").is_file(), "the wheel's own files, by its hash"


def test_a_runners_lock_holds_the_apps_dependencies_and_build_backend(tmp_path: Path, index: tuple[Path, Path]) -> None:
    wheels, wheel = index
    app = an_app(tmp_path)
    out = "baselines/My-Runner/gate-lock.txt"
    done = resolve(app, "--for", "measure", "--extras", "", "--specdec-wheel", str(wheel), "--find-links",
                   str(wheels), "--out", out)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{out}: " in done.stdout
    pins = read_pins(app / out)
    assert {"pytest-specdec", "tabulate", "setuptools"} <= set(pins)
    assert "httpx" not in pins, "the webhook's client is the hosted jobs'"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--platform", "sunos-sparc-py3.9"], "--platform 'sunos-sparc-py3.9' is neither one pip can resolve for"),
        (["--specdec-wheel", "dist/absent.whl"], "--specdec-wheel dist/absent.whl: no such file"),
        ([], "is not on the index: build its wheel from a named commit"),
    ],
)
def test_a_lock_that_cannot_be_resolved_is_one_line_and_writes_nothing(
    tmp_path: Path, index: tuple[Path, Path], args: list[str], said: str
) -> None:
    wheels, _ = index
    app = an_app(tmp_path)
    done = resolve(app, "--for", "alert", "--find-links", str(wheels), "--out", "lock.txt", *args)
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert said in line
    assert not (app / "lock.txt").exists()


def test_the_lock_step_keeps_the_pin_set_up_installed_by_hash(tmp_path: Path) -> None:
    """What set-up installed from a lock (pytest-specdec from a wheel the index may not serve again) is locked
    with that lock's hash; a package at another version than the lock's is hashed from the index."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in ("tabulate", "iniconfig"):
        repack(name, wheels)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "uninstall", "-q", "-y", "setuptools"], check=False, capture_output=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels), "tabulate", "iniconfig"],
                   check=True, capture_output=True)  # fmt: skip
    from importlib.metadata import version

    kept = {"tabulate": Pin("tabulate", version("tabulate"), ("ab" * 32,)),
            "iniconfig": Pin("iniconfig", "0.0.1", ("cd" * 32,))}  # fmt: skip
    pins = environment_pins(python, f"--no-index --find-links {wheels}", kept)
    assert pins["tabulate"].hashes == ("ab" * 32,), "the installed version's pin, as set-up checked it"
    (other,) = wheels.glob("iniconfig-*.whl")
    assert pins["iniconfig"].hashes == (hashlib.sha256(other.read_bytes()).hexdigest(),), "another version: hashed anew"


def test_in_pytest_specdecs_own_checkout_the_lock_is_its_dependencies_not_itself() -> None:
    from pytest_specdec.gate.resolve_lock import Request, requirements

    measure = requirements(Request("darwin-arm64-py3.12", "measure", REPO))
    alert = requirements(Request("linux-x86_64-py3.12", "alert", REPO))
    assert not [r for r in measure + alert if r.startswith("pytest-specdec")], "the project is the checkout"
    assert {"scipy>=1.11", "setuptools>=68"} <= set(measure) & set(alert)
    assert "mlx-lm>=0.28.3" in measure, "[all]: the engines"
    assert "mlx-lm>=0.28.3" not in alert
    assert "httpx>=0.27" in alert, "the webhook's client"
