"""mlx-lm adapter: plain ``stream_generate`` vs ``draft_model=`` speculative decoding.

Runs on Metal on Apple silicon and on the CPU elsewhere (``pip install "mlx[cpu]"``).
Acceptance comes from mlx-lm's ``from_draft`` flag. Drafting is **observed**, never
rebuilt from what was asked: the draft model is handed to mlx-lm inside a wrapper that
counts its forward calls, and so is the target. In ``speculative_generate_step``
(mlx_lm/generate.py) the draft reads the prompt first (``_prefill(draft_model, …)``), then
the target does; after that, every draft call is one ``_step`` of ``_draft_generate``, which
proposes one token. The drafted count is the draft's calls made after the target's first
call: a release that never calls the draft reads 0, and the comparison says SD is not engaged.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_specdec.backends.base import (
    BackendOptions,
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    TokenBurst,
)
from pytest_specdec.backends.context import config_context
from pytest_specdec.backends.files import model_dir_digest
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.backends.mlx_lm_parts import CountedModel, resolve_reference
from pytest_specdec.embedded import models
from pytest_specdec.embedded.gemma_mlx import EARLY_EXIT
from pytest_specdec.embedded.prompts import ChatMessage
from pytest_specdec.errors import ModelLoadError, TemplateRefused

if TYPE_CHECKING:
    from mlx_lm.tokenizer_utils import TokenizerWrapper


def _config(path: Path) -> dict[str, object]:
    import json

    loaded: dict[str, object] = json.loads((path / "config.json").read_text(encoding="utf-8"))
    return loaded


class _LoadedModel:
    def __init__(self, reference: str, path: Path, model: Any, tokenizer: TokenizerWrapper) -> None:
        self.reference = reference
        self.path = path
        self.model = model
        self.tokenizer = tokenizer


def _load(reference: str) -> _LoadedModel:
    from mlx_lm import load
    from mlx_lm.utils import _download

    resolved = resolve_reference(reference)
    try:
        path = _download(resolved)
        model, tokenizer = load(str(path))
    except Exception as error:  # mlx-lm raises many kinds; the user needs one line
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ModelLoadError(
            f"cannot load mlx model {reference!r}: {first} — give a local mlx model directory or a cached Hugging Face repo id"
        ) from None
    return _LoadedModel(reference, Path(path), model, tokenizer)


class MlxBackend:
    """A target (and optional draft) loaded once with mlx-lm."""

    name: ClassVar[str] = "mlx"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        reader = BackendOptions(self.name, options)
        self._chat_template = reader.flag("chat_template", True)
        reader.reject_unknown()
        self._pair = pair
        self._rendered: set[str] = set()  # texts its chat template made (chat_text): generated as they are
        self._target = _load(pair.target)
        self._draft = _load(pair.draft) if pair.draft else None
        if self._draft is not None:
            target_vocab = self._target.tokenizer.vocab_size
            draft_vocab = self._draft.tokenizer.vocab_size
            if self._target.tokenizer.get_vocab() != self._draft.tokenizer.get_vocab():
                raise ModelLoadError(
                    f"draft {pair.draft!r} has a different vocabulary from target {pair.target!r} "
                    f"({draft_vocab} vs {target_vocab} tokens) — choose a draft of the same model family"
                )

    @property
    def pair(self) -> ModelPair:
        """The loaded target and draft."""
        return self._pair

    def speculation_kind(self) -> SpeculationKind:
        """A draft model, or the target's own first layers when the draft is an early exit (``#early-exit=K``)."""
        early = self._pair.draft is not None and EARLY_EXIT in self._pair.draft
        return SpeculationKind.EARLY_EXIT if early else SpeculationKind.DRAFT_MODEL

    def fingerprint(self) -> Fingerprint:
        """mlx and mlx-lm versions and the mlx device (Metal GPU name and arch, or CPU)."""
        from importlib.metadata import version

        import mlx.core as mx

        info = mx.device_info()
        kind = "gpu" if mx.default_device() == mx.gpu else "cpu"
        device = (
            f"{kind}: {info.get('device_name', platform.processor())} ({info.get('architecture', platform.machine())})"
        )
        details = {
            "memory_size": str(info.get("memory_size", "")),
            "max_recommended_working_set_size": str(info.get("max_recommended_working_set_size", "")),
        }
        return Fingerprint(
            backend=self.name,
            release=f"mlx-lm {version('mlx-lm')}",
            versions={"mlx": version("mlx"), "mlx-lm": version("mlx-lm")},
            device=device,
            details={k: v for k, v in details.items() if v},
        )

    def weight_bytes(self) -> int:
        """The target's safetensors size."""
        return sum(p.stat().st_size for p in self._target.path.glob("*.safetensors"))

    def model_digest(self) -> str:
        """Digest of the target's (and draft's) files."""
        parts = [model_dir_digest(self._target.path)]
        if self._draft is not None:
            parts.append(model_dir_digest(self._draft.path))
        return "+".join(parts)

    def is_base_model(self) -> bool:
        """A real model whose tokenizer has no chat template (the synthetic pairs keep the instruction suite)."""
        tokenizer = self._target.tokenizer
        return not models.is_embedded(self._pair.target) and not getattr(tokenizer, "chat_template", None)

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens``."""
        return str(self._target.tokenizer.decode(tokens))

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the target's tokenizer (no BOS, no template)."""
        return len(self._target.tokenizer.encode(text, add_special_tokens=False))

    def template_tokens(self) -> int:
        """What the prompt's ids add to a one-word prompt: the tokenizer's chat template (unless turned off), a BOS."""
        return max(len(self._prompt_ids("x")) - self.count_tokens("x"), 0)

    def context_window(self) -> int:
        """The target config's ``max_position_embeddings``."""
        return config_context(_config(self._target.path))[0]

    def context_bytes(self, tokens: int) -> int:
        """Target's and draft's KV caches at ``tokens`` positions (mlx-lm grows them as the prompt fills them),
        and the draft's weights."""
        held = config_context(_config(self._target.path))[1] * tokens
        if self._draft is not None:
            held += config_context(_config(self._draft.path))[1] * tokens
            held += sum(p.stat().st_size for p in self._draft.path.glob("*.safetensors"))
        return int(held)

    def prepare_context(self, tokens: int) -> None:
        """Nothing to size: the cache grows with the prompt."""

    def chat_text(self, messages: Sequence[ChatMessage]) -> str | None:
        """The tokenizer's chat template applied to ``messages`` (mlx-lm's server does the same); ``None``: it has
        none, or ``chat_template=false``."""
        tokenizer = self._target.tokenizer
        if not (self._chat_template and getattr(tokenizer, "chat_template", None)):
            return None
        asked = [message._asdict() for message in messages]
        try:
            text = str(tokenizer.apply_chat_template(asked, tokenize=False, add_generation_prompt=True))
        except Exception as error:  # the template's own raise_exception (a role it does not take) …
            raise TemplateRefused(f"{self._pair.target}'s chat template refused the conversation: {error}") from None
        self._rendered.add(text)
        return text

    def _prompt_ids(self, prompt: str) -> list[int]:
        tokenizer = self._target.tokenizer
        if prompt in self._rendered:  # already in the template: its special tokens as written, nothing added
            return list(tokenizer.encode(prompt, add_special_tokens=False))
        if self._chat_template and getattr(tokenizer, "chat_template", None):
            ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)
            return list(ids)
        return list(tokenizer.encode(prompt))

    def step_costs(self, prompt: str, num_draft: int, repeats: int = 9) -> tuple[float, float, float, str]:
        """Median times of a draft step, a 1-token and a (γ+1)-token target step after ``prompt``."""
        tokens = self._prompt_ids(prompt)
        filler = (tokens * (num_draft + 2))[: num_draft + 1]
        one = _forward_seconds(self._target.model, tokens, filler[:1], repeats)
        wide = _forward_seconds(self._target.model, tokens, filler, repeats)
        draft = _forward_seconds(self._draft.model, tokens, filler[:1], repeats) if self._draft else 0.0
        return draft, one, wide, "mlx forward passes on a prompt cache, median of 9"

    def compiles_per_shape(self) -> bool:
        """On a GPU (Metal or CUDA) mlx builds kernels per shape as it first meets them; on the CPU it does not."""
        import mlx.core as mx

        return bool(mx.default_device() == mx.gpu)

    def logit_margin(self, prompt: str, prefix: Sequence[int], first: int, second: int) -> float | None:
        """The plain arm's ``logit(first) - logit(second)`` after ``prompt`` + ``prefix`` (in float32).

        One forward pass of the target over the whole prefix: where the arms part on a
        token whose two best logits differ by less than the near-tie limit (fp16 on a GPU
        batches verify steps differently from single steps), that is arithmetic, not SD.
        """
        import mlx.core as mx

        tokens = [*self._prompt_ids(prompt), *prefix]
        logits = self._target.model(mx.array([tokens]))[0, -1].astype(mx.float32)
        return float(logits[first].item() - logits[second].item())

    def sampled_draws_per_seed(self) -> str:
        """``distribution``: mlx-lm's draft samples with the same sampler from the global ``mx.random`` state
        and the target samples a whole round in one call (mlx_lm/generate.py: speculative_generate_step), so one
        seed gives other tokens than plain decoding; a draft token stands where it equals the target's draw, so
        each emitted token is still the target's sample and only the distribution can be checked."""
        return "distribution"

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Stream one generation (greedy, or sampled from the request's seed); speculative arms pass the draft."""
        import mlx.core as mx
        from mlx_lm import stream_generate

        if request.arm.speculative and self._draft is None:
            raise ModelLoadError("a speculative arm needs a draft model — set --specdec-draft")
        mx.random.seed(request.seed)
        mx.reset_peak_memory()
        prompt = self._prompt_ids(request.prompt)
        kwargs: dict[str, Any] = {"max_tokens": request.max_tokens}
        if not request.sampling.greedy:  # mlx_lm/sample_utils.py: make_sampler (categorical on mx.random's state)
            from mlx_lm.sample_utils import make_sampler

            kwargs["sampler"] = make_sampler(temp=request.sampling.temperature, top_p=request.sampling.top_p)
        speculative = request.arm.speculative  # with a draft: checked above
        # Inside the decode window per token: two appends (a burst only where every_token asks; issue #52).
        # The plain arm's target runs unwrapped: only the SD arm reads a count (the draft's, from the target's).
        target = CountedModel(self._target.model) if speculative else self._target.model
        draft = CountedModel(self._draft.model, after=target) if speculative and self._draft is not None else None
        if draft is not None:
            kwargs.update(draft_model=draft, num_draft_tokens=request.arm.num_draft)
        tokens: list[int] = []
        flags: list[bool] = []
        every, budget, sent = request.every_token, request.max_tokens, 0
        stream = stream_generate(target, self._target.tokenizer, prompt, **kwargs)
        try:
            for response in stream:  # mlx-lm's GenerationResponse: token an int (y.item()), from_draft a bool
                tokens.append(response.token)
                flags.append(response.from_draft)
                if len(tokens) >= budget or response.finish_reason is not None:  # the last: before mlx-lm's clean-up
                    break
                if every or not sent:
                    yield TokenBurst(tuple(tokens[sent:]), tuple(flags[sent:]))
                    sent = len(tokens)
            if len(tokens) > sent:  # before the stream closes: the last token's arrival ends the decode window
                yield TokenBurst(tuple(tokens[sent:]), tuple(flags[sent:]))
        finally:
            stream.close()
        return GenerationStats(
            prompt_tokens=len(prompt),
            drafted=draft.counted if draft is not None else None,
            accepted=sum(flags) if speculative else None,
            peak_memory_bytes=int(mx.get_peak_memory()),
        )

    def close(self) -> None:
        """Drop the models and mlx's buffer cache."""
        import mlx.core as mx

        self._draft = None
        mx.clear_cache()


def _forward_seconds(model: Any, prefix: Sequence[int], tokens: Sequence[int], repeats: int) -> float:
    """Median time of one forward pass over ``tokens`` after a cached ``prefix``."""
    import statistics
    import time

    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

    cache = make_prompt_cache(model)
    mx.eval(model(mx.array(list(prefix))[None], cache=cache))
    batch = mx.array(list(tokens))[None]
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        mx.eval(model(batch, cache=cache))
        samples.append(time.perf_counter() - start)
        trim_prompt_cache(cache, len(tokens))
    return statistics.median(samples)
