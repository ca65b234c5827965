"""Identity of model files on disk: a cheap, content-sensitive digest."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

_EDGE = 1 << 20  # bytes read from each end of a file


def looks_like_path(reference: str) -> bool:
    """Whether a model reference is meant as a filesystem path (not a hub id)."""
    return reference.startswith(("/", "./", "../", "~")) or reference.endswith((".gguf", ".safetensors"))


def files_digest(paths: Iterable[Path]) -> str:
    """sha256 over each file's name, size and first and last MiB.

    Re-quantizing, re-converting or swapping a model changes it; hashing whole
    multi-gigabyte files on every run would not be worth the minutes.
    """
    digest = hashlib.sha256()
    for path in sorted(paths):
        size = path.stat().st_size
        digest.update(f"{path.name}\0{size}\0".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(_EDGE))
            if size > 2 * _EDGE:
                handle.seek(-_EDGE, 2)
                digest.update(handle.read(_EDGE))
    return digest.hexdigest()[:16]


def model_dir_digest(directory: Path) -> str:
    """Digest of the weight, config and tokenizer files of a model directory."""
    patterns = ("*.safetensors", "*.json", "*.gguf", "tokenizer.model")
    return files_digest(p for pattern in patterns for p in directory.glob(pattern))
