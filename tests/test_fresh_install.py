"""A new user's first hour, from nothing: fresh venvs on Python 3.11 and 3.12 resolving every dependency from the
package index as a user's pip would, then the README's Install block and `make bench`, run as written.

Behind the ``fresh_install`` marker (network and several minutes a Python): ``make fresh-install`` runs it. No
pip configuration of this machine is used (its local indexes and constraints file are switched off with
``PIP_CONFIG_FILE=/dev/null``); what a user would not have is only the checkout's neighbour ``../shared/wheels``
(two prebuilt llama.cpp wheels that otherwise compile for about 30 minutes, as the README says), linked beside
the copied checkout because the Makefile looks there, as it does in this repository.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from test_readme_commands import PLAIN_WORDS, REPO, readme_block

pytestmark = pytest.mark.fresh_install

SHARED_WHEELS = REPO.parent / "shared" / "wheels"
# A claim's one-line answer (render/report.py claim_answers): "claim d (SD ≤ 1.3x): holds on code; ...".
CLAIM_ANSWER = re.compile(r"^claim (\w+) \(.*\): (.*)$", re.MULTILINE)


def interpreter(version: str) -> Path:
    """A ``python3.X`` that runs: pyenv's own build of it (its shims answer only for the selected version), else
    the one on PATH."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = [*sorted(pyenv.glob(f"{version}.*/bin/python{version}")), shutil.which(f"python{version}")]
    for candidate in filter(None, found):
        if subprocess.run([str(candidate), "-c", ""], capture_output=True, check=False).returncode == 0:
            return Path(candidate)
    pytest.skip(f"no python{version} that runs, on PATH or under {pyenv}")


def users_environment(home: Path, python: Path) -> dict[str, str]:
    """This process's environment without any pip setting of this machine: pip resolves from the package index."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        HOME=str(home),
        PATH=f"{python.parent}{os.pathsep}{env['PATH']}",
    )
    for kept in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT"):  # how this machine reaches the index, not what it installs
        if kept in os.environ:
            env[kept] = os.environ[kept]
    env["COLUMNS"] = (
        "160"  # the table's "in words" cell on one line (fitting 80 columns is tests/test_terminal_width.py's)
    )
    return env


def copy_of_the_checkout(root: Path) -> Path:
    """The files ``git`` would give a clone (tracked and not ignored), with ``../shared/wheels`` beside them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    checkout = root / "work" / "checkout"
    for name in filter(None, listed):
        source = REPO / name
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # benchmarks -> pytest_specdec/benchmarks, as git keeps it
            (checkout / name).symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, checkout / name)
    if SHARED_WHEELS.is_dir():
        (root / "work" / "shared").mkdir()
        (root / "work" / "shared" / "wheels").symlink_to(SHARED_WHEELS)
    return checkout


def run(line: str, cwd: Path, env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)  # fmt: skip
    print(f"$ {line}\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    return done


@pytest.mark.parametrize("version", ["3.11", "3.12"])
def test_a_new_user_gets_answers_from_the_readme_on_a_fresh_python(version: str, tmp_path: Path) -> None:
    python = interpreter(version)
    home = tmp_path / "home"
    home.mkdir()
    env = users_environment(home, python)
    checkout = copy_of_the_checkout(tmp_path)

    # The Install block: the package comes from a wheel of this checkout (it is not on the index), every
    # dependency from the index.
    built = run(f"python{version} -m pip wheel --no-deps -q -w {tmp_path / 'dist'} .", checkout, env)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("pytest_specdec-*.whl")
    lines = readme_block("readme-try")
    assert lines[0].startswith("python3.12 -m venv ~/.venvs/specdec"), "the README makes a venv first"
    assert lines[1].startswith('pip install "pytest-specdec[mlx]"')
    block = [lines[0].replace("python3.12", f"python{version}"), lines[1].replace("pytest-specdec", str(wheel)),
             *lines[2:]]  # fmt: skip
    done = run(" && ".join(block), tmp_path, env)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    assert PLAIN_WORDS.search(done.stdout), done.stdout[-3000:]
    venv_python = home / ".venvs" / "specdec" / "bin" / "python"
    said = subprocess.run([str(venv_python), "-V"], capture_output=True, text=True, check=True).stdout
    assert said.startswith(f"Python {version}."), said

    # Quick start: `make bench` on the fresh checkout (it makes .venv itself), timed apart from the install.
    started = time.monotonic()
    installed = run(f"make install PYTHON=python{version}", checkout, env)
    install_s = time.monotonic() - started
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert (checkout / ".venv" / f".python-{version}").exists()
    started = time.monotonic()
    bench = run(f"make bench PYTHON=python{version}", checkout, env)
    bench_s = time.monotonic() - started
    assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
    assert "expected" in bench.stdout, bench.stdout[:3000]
    answers = dict(CLAIM_ANSWER.findall(bench.stdout))
    assert answers, bench.stdout[-3000:]
    for claim, said in answers.items():  # at least one row of each claim run is decided here
        assert re.search(r"\b(holds|refuted)\b", said), f"claim {claim} decided no row: {said}"
    # Share your result: the README's two commands on what make bench kept, as written.
    share = readme_block("readme-share")
    shared = run(" && ".join([share[0] + " --repository ada/pytest-specdec", share[1]]), checkout,
                 {**env, "PATH": f"{checkout / '.venv' / 'bin'}:{env['PATH']}"})  # fmt: skip
    assert shared.returncode == 0, shared.stdout[-3000:] + shared.stderr[-3000:]
    assert "issues/new?" in shared.stdout
    assert re.search(r"specdec validate: [1-9]\d* consistent, 0 rejected", shared.stdout), shared.stdout[-3000:]
    print(f"python {version}: make install {install_s:.0f} s, make bench {bench_s:.0f} s")
