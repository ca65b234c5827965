"""Pin what ``make lint`` runs, on each supported Python (a maintainer's tool, not shipped).

    python scripts/dev_constraints.py            # rewrites dev-constraints.txt

Lint must not depend on the day's resolver: a new numpy (2.5 on Python 3.12, 2.4 on 3.11) once
brought mypy errors to 3.12 that 3.11 did not have. So the project's own dependencies and its
``[lint]`` extra (linters, mypy, stubs and every library mypy follows) are resolved by pip with
each Python's own interpreter (``pip install --dry-run --ignore-installed --report``), and every
package they pull in is pinned — once where all Pythons agree, with a ``python_version`` marker where
they do not. The Makefile installs with ``-c dev-constraints.txt``; ``make lint-pythons`` (which
``.ci/run`` runs) lints on each Python under these pins. Run this when a pin should move, then
``make lint-pythons`` before committing the file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = ("3.11", "3.12", "3.13")
OUT = ROOT / "dev-constraints.txt"


def interpreter(version: str) -> str:
    """``pythonX.Y`` on PATH, else pyenv's newest X.Y (its shims refuse versions that are not selected)."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", ""], capture_output=True, check=False).returncode == 0:
        return found
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=True).stdout.strip()
        names = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True, check=True).stdout
        matching = [n for n in names.split() if n == version or n.startswith(version + ".")]
        if matching:
            return f"{root}/versions/{matching[-1]}/bin/python{version}"
    sys.exit(f"dev_constraints: no Python {version} here — install it (pyenv install {version}) and run again")


def requirements() -> list[str]:
    """The project's dependencies and its [lint] extra, as written in pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["lint"]]


def resolved(version: str) -> dict[str, str]:
    """Every package pip installs for the requirements on Python ``version``: name → version."""
    command = [interpreter(version), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--report", "-", *requirements()]  # fmt: skip
    report = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}


def render(pins: dict[str, dict[str, str]]) -> str:
    """One ``name==version`` line where every Python agrees, a marked line per Python where not."""
    lines = [
        "# What `make lint` and the dev install run, on Python " + ", ".join(PYTHONS) + ".",
        "# Made by scripts/dev_constraints.py (pip's own resolver, each Python's interpreter); do not edit by hand.",
    ]
    names = sorted({name for found in pins.values() for name in found})
    for name in names:
        versions = {python: found.get(name) for python, found in pins.items()}
        if len(set(versions.values())) == 1:
            lines.append(f"{name}=={next(iter(versions.values()))}")
            continue
        lines += [f'{name}=={v}; python_version == "{p}"' for p, v in versions.items() if v is not None]
    return "\n".join(lines) + "\n"


def main() -> int:
    pins = {version: resolved(version) for version in PYTHONS}
    OUT.write_text(render(pins), encoding="utf-8")
    print(
        f"dev_constraints: wrote {OUT.relative_to(ROOT)} ({sum(map(len, pins.values()))} pins over {len(PYTHONS)} Pythons)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
