"""A fresh virtual environment holding the wheel built from this checkout, as a user installs it.

The environment reaches no package index: the dependencies come from the environment running the
tests (one path line), never ``pytest_specdec`` itself, which comes only from the wheel.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def wheel_venv(root: Path) -> Path:
    """Build the wheel under ``root`` and install it into ``root/venv``; returns the venv's bin folder."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(root / "dist"),
         str(REPO)], check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = (root / "dist").glob("pytest_specdec-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    bin_dir = root / "venv" / "bin"
    site = subprocess.run(
        [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # Dependencies from this environment; its own pytest_specdec (an editable install) is not on this path.
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)  # fmt: skip
    # The console script pip writes for the pytest dependency (its install was skipped above): this
    # environment's own, pointed at the new interpreter.
    script = bin_dir / "pytest"
    own = Path(sys.executable).parent / "pytest"
    script.write_text(f"#!{bin_dir / 'python'}\n" + own.read_text(encoding="utf-8").split("\n", 1)[1])
    script.chmod(0o755)
    return bin_dir


def run_line(line: str, bin_dir: Path, cwd: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    """``line`` as a shell user types it, with the venv's bin folder first on PATH (no PYTHONPATH).

    Bytecode is written as in a user's shell: CI's writes ``__pycache__``, this box's shell does not.
    """
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **environment}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return subprocess.run(shlex.split(line), cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)
