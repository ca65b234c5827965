"""Shared by the backend tests: the stand-ins' generation engine, and an ``ollama`` that serves the stand-in."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def engine() -> Iterator[object]:
    """Real generations behind the stand-in servers (the synthetic pair on llama-cpp-python)."""
    pytest.importorskip("llama_cpp", reason="the stand-ins generate with llama-cpp-python (extra [llama-cpp])")
    from pytest_specdec.backends.standin.engine import GenerationEngine

    shared = GenerationEngine()
    yield shared
    shared.close()


@pytest.fixture
def fake_ollama_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ``ollama`` executable that serves the stand-in on $OLLAMA_HOST (answering as release
    $SPECDEC_TEST_OLLAMA_VERSION when set), its stdout and stderr the server's log."""
    binary = tmp_path / "bin" / "ollama"
    binary.parent.mkdir()
    binary.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "from pytest_specdec.backends.standin.__main__ import main\n"
        "assert sys.argv[1:] == ['serve'], sys.argv\n"
        "port = os.environ['OLLAMA_HOST'].rsplit(':', 1)[1]\n"
        "version = os.environ.get('SPECDEC_TEST_OLLAMA_VERSION')\n"
        "sys.exit(main(['ollama', '--port', port, *(['--ollama-version', version] if version else [])]))\n"
    )
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{binary.parent}{os.pathsep}{os.environ['PATH']}")
    return binary
