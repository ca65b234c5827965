"""MTPLX's release as ``mtplx --version`` prints it (``mtplx 2.12.2``: mtplx/cli.py in the 2.12.2 wheel)."""

from __future__ import annotations

import re

from pytest_specdec.backends.server_process import program_output

MTPLX_VERSION = re.compile(r"^mtplx (\S+)", re.MULTILINE)


def server_releases() -> dict[str, str]:
    """``{"mtplx (server)": "2.12.2"}`` when an ``mtplx`` program answers."""
    found = MTPLX_VERSION.findall(program_output(["mtplx", "--version"]))
    return {"mtplx (server)": found[0]} if found else {}
