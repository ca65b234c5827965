"""Homebrew's kept kegs: where last night's server release still lies after ``brew upgrade``.

Homebrew installs each release of a formula in its own keg,
``$(brew --cellar FORMULA)/<version>/``, and removes the older kegs right after an
upgrade unless cleanup is turned off for that formula (``HOMEBREW_NO_CLEANUP_FORMULAE``
or ``HOMEBREW_NO_INSTALL_CLEANUP``, Homebrew's FAQ "How do I update my local packages?").
The shipped ``upgrade-servers`` command keeps them, so the gate can run the old server
beside the new one the same night.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pytest_specdec.backends.server_process import program_output

# The shipped ``upgrade-servers``: Homebrew's servers to their newest release, last night's keg kept beside it.
UPGRADE_SERVERS = (
    "brew cleanup ollama llama.cpp; HOMEBREW_NO_CLEANUP_FORMULAE=ollama,llama.cpp brew upgrade ollama llama.cpp"
)


def cellar(formula: str) -> Path | None:
    """``brew --cellar FORMULA``, when Homebrew is installed."""
    if shutil.which("brew") is None:
        return None
    said = program_output(["brew", "--cellar", formula]).strip().splitlines()
    return Path(said[-1]) if said else None


def kept_program(formula: str, version: str, program: str) -> Path | None:
    """``<cellar>/<version>[_<revision>]/bin/<program>`` of a kept keg, the newest revision first."""
    rack = cellar(formula)
    if rack is None or not rack.is_dir() or not version:
        return None
    kegs = sorted(
        (keg for keg in rack.iterdir() if keg.name == version or keg.name.startswith(f"{version}_")), reverse=True
    )
    for keg in kegs:
        found = keg / "bin" / program
        if found.is_file():
            return found
    return None
