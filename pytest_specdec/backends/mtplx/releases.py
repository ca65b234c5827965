"""MTPLX's release as ``mtplx --version`` prints it (``mtplx 2.12.2``: mtplx/cli.py in the 2.12.2 wheel)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pytest_specdec.backends.base import OldRelease
from pytest_specdec.backends.server_process import program_output

MTPLX_VERSION = re.compile(r"^mtplx (\S+)", re.MULTILINE)


def server_releases() -> dict[str, str]:
    """``{"mtplx (server)": "2.12.2"}`` when an ``mtplx`` program answers."""
    found = MTPLX_VERSION.findall(program_output(["mtplx", "--version"]))
    return {"mtplx (server)": found[0]} if found else {}


def previous_release(old_venv: Path | None, before: Mapping[str, str]) -> OldRelease | None:
    """The old environment's ``mtplx`` (pip releases install side by side), when it says last night's release."""
    old = before.get("mtplx (server)", "")
    program = old_venv / "bin" / "mtplx" if old_venv is not None else None
    if program is None or not program.is_file() or not old:
        return None
    said = MTPLX_VERSION.findall(program_output([str(program), "--version"]))
    return OldRelease(f"mtplx {old}", program=str(program)) if said[:1] == [old] else None
