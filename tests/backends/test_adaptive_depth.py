"""Where the engine picks the draft length itself (Ollama's MLX engine), no record carries a γ."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from pytest_specdec.backends.ollama.standin import OllamaHandler
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer


@pytest.fixture
def ollama(engine: GenerationEngine) -> Iterator[StandinServer]:
    server = StandinServer(OllamaHandler, engine).start()
    yield server
    server.stop()


def test_the_mlx_engines_depth_starts_cold_and_deepens_whatever_is_asked(ollama: StandinServer) -> None:
    body = {"model": "specdec-synthetic:draft", "prompt": "one two", "stream": False,
            "options": {"num_predict": 4, "draft_num_predict": 7}}  # fmt: skip
    depths = []
    for _ in range(4):
        httpx.post(ollama.url + "/api/generate", json=body, timeout=30).raise_for_status()
        depths.append(ollama.state["mlx_depth"]["specdec-synthetic:draft"])
    assert depths == [1, 2, 3, 3], "one step deeper per request up to its limit; draft_num_predict is never read"


SD_TAG = [
    "--backend=ollama", "--specdec-model=specdec-synthetic:draft", "--specdec-backend-option=sd=tag",
    "--specdec-backend-option=plain_model=specdec-synthetic:plain", "--specdec-min-trials=2",
    "--specdec-max-trials=2", "-p", "no:cacheprovider",
]  # fmt: skip


def test_a_comparison_on_the_mlx_engine_is_recorded_as_adaptive(
    pytester: pytest.Pytester, ollama: StandinServer
) -> None:
    pytester.makepyfile(
        """
        def test_sd(specdec):
            specdec.compare(category="copy", max_tokens=8)
        """
    )
    result = pytester.runpytest(*SD_TAG, f"--specdec-ollama-host={ollama.url}", "--specdec-json=run.json")
    assert result.ret in (0, 1)  # the verdict is whatever was measured
    (comparison,) = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    assert comparison["conditions"]["num_draft"] == 0
    result.stdout.fnmatch_lines(["*ollama *copy* upstream *"])


def test_a_gamma_on_the_mlx_engine_is_refused_in_one_line(pytester: pytest.Pytester, ollama: StandinServer) -> None:
    pytester.makepyfile(
        """
        def test_sweep(specdec):
            specdec.compare(category="copy", num_draft=4, max_tokens=8)
        """
    )
    result = pytester.runpytest(*SD_TAG, f"--specdec-ollama-host={ollama.url}")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*picks the draft length itself each round (no γ is sent): num_draft=4 would label*"])


def test_a_gamma_from_the_command_line_that_cannot_apply_is_said(
    pytester: pytest.Pytester, ollama: StandinServer
) -> None:
    pytester.makepyfile(
        """
        def test_sd(specdec):
            specdec.compare(category="copy", max_tokens=8)
        """
    )
    result = pytester.runpytest(*SD_TAG, f"--specdec-ollama-host={ollama.url}", "--specdec-num-draft=5",
                                "--specdec-notes=all", "--specdec-json=run.json")  # fmt: skip
    (comparison,) = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    assert comparison["conditions"]["num_draft"] == 0, "the record says upstream, never the γ that did not run"
    assert any(note.startswith("γ=5 (--specdec-num-draft or [tool.specdec]) does not apply: ollama picks")
               for note in comparison["notes"])  # fmt: skip
    result.stdout.fnmatch_lines(["*γ=5 (--specdec-num-draft*does not apply*"])


def test_a_gguf_tag_with_a_draft_drafts_ollamas_own_default_unless_given(
    pytester: pytest.Pytester, ollama: StandinServer
) -> None:
    """Left unset, draft_num_predict on a GGUF tag with a DRAFT is 4 (api/types.go, server/routes.go): that is the
    default arm; a γ given is a tuned one."""
    pytester.makepyfile(
        """
        def test_sd(specdec):
            specdec.compare(category="copy", max_tokens=8)
        """
    )
    run = ["--backend=ollama", "--specdec-model=specdec-synthetic:gguf-draft", f"--specdec-ollama-host={ollama.url}",
           "--specdec-min-trials=2", "--specdec-max-trials=2", "-p", "no:cacheprovider", "--specdec-json=run.json"]  # fmt: skip
    pytester.runpytest(*run)
    (default,) = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    sent = {body["options"].get("draft_num_predict") for _, path, body in ollama.requests if path == "/api/generate"}
    assert default["conditions"]["num_draft"] == 4
    assert 4 in sent
    pytester.runpytest(*run, "--specdec-num-draft=2")
    (tuned,) = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    assert tuned["conditions"]["num_draft"] == 2
    assert "a tuned arm: γ=2, where ollama's users get 4 by default" in tuned["notes"]
