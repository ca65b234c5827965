"""The context axis: every prompt behind a prefix of a given number of tokens, and whether it fits.

A user's long-context request is a long document and then a question. A comparison at
context *N* puts *N* tokens of text before each prompt of the suite: the suite's own texts
(every category, both styles), repeated, each prompt's prefix starting at another text so
no two prompts share one. The prefix is cut by the backend's own tokenizer to the longest
text of at most *N* tokens; what ran is read back from the backend (each trial's prompt
tokens), never assumed from *N*.

Before anything runs a length must be inside the target's window (prefix, prompt, the
tokens generated and a draft's look-ahead) and must fit this machine's memory with the
caches that length needs (:class:`~pytest_specdec.backends.context.KnowsContext`). A length
that does not is *not measurable here*, said in one line with the numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_specdec.backends.base import Backend
from pytest_specdec.backends.context import CONTEXT_METHODS, KnowsContext
from pytest_specdec.embedded.prompts import CONTINUATION_SUITE, FIRST_CATEGORIES, SUITE, Prompt
from pytest_specdec.errors import NotMeasurableHere, SpecdecUsageError
from pytest_specdec.roofline import MemoryFit

CountTokens = Callable[[str], int]
EXTRA_BLOCKS = 8  # blocks added past the estimate before a count that does not grow is called what it is


def _filler(start: int) -> str:
    """The suite's texts joined, starting at text ``start`` (each prompt's prefix starts elsewhere)."""
    # The first four content classes only: the filler keeps the text its context results were measured on.
    texts = [p.text for p in (*SUITE, *CONTINUATION_SUITE) if p.category in FIRST_CATEGORIES]
    start %= len(texts)
    return "\n\n".join(texts[start:] + texts[:start]) + "\n\n"


def prefix_text(tokens: int, count: CountTokens, start: int = 0) -> str:
    """The longest run of the suite's text (from text ``start``) that is at most ``tokens`` tokens."""
    if tokens <= 0:
        return ""
    block = _filler(start)
    if count(block) <= 0:  # a tokenizer that answers nothing would grow the text for ever
        raise SpecdecUsageError("the backend counted no tokens in the suite's text — it cannot build a context prefix")
    text = block * (tokens // count(block) + 2)
    for _ in range(EXTRA_BLOCKS + 1):  # tokens merge across the joins: rarely, one more block
        if count(text) > tokens:
            break
        text += block
    else:  # a tokenizer whose count stops growing (one that caps its length) would grow the text for ever
        raise SpecdecUsageError(
            f"the backend's token count stopped growing at {count(text)} tokens for {len(text):,} characters of text "
            f"— it cannot build a context prefix of {tokens} tokens"
        )
    low, high = 0, len(text)  # count(text[:low]) <= tokens < count(text[:high])
    while high - low > 1:
        middle = (low + high) // 2
        if count(text[:middle]) <= tokens:
            low = middle
        else:
            high = middle
    return text[:low]


def with_context(prompts: Sequence[Prompt], tokens: int, count: CountTokens) -> tuple[Prompt, ...]:
    """Each prompt behind a prefix of ``tokens`` tokens (none at 0); ids and categories unchanged."""
    if tokens <= 0:
        return tuple(prompts)
    chat = next((p.id for p in prompts if p.messages), None)
    if chat is not None:
        raise SpecdecUsageError(
            f"prompt {chat} is a conversation already in its chat template: a context length pads text prompts only "
            "— measure the context axis on a text set (code, prose, …)"
        )
    return tuple(
        Prompt(p.id, p.category, f"{prefix_text(tokens, count, index)}\n\n{p.text}") for index, p in enumerate(prompts)
    )


@dataclass(frozen=True)
class ContextNeeds:
    """The positions a comparison at a context length holds, and what that costs in memory."""

    tokens: int  # the longest prompt with its prefix, in the target's tokens
    positions: int  # that, plus the tokens generated, a draft's look-ahead and what the backend wraps it in
    window: int
    fit: MemoryFit

    @property
    def problem(self) -> str | None:
        """One line when the length cannot run here, else ``None``."""
        if self.positions > self.window:
            return (
                f"{self.positions} positions ({self.tokens} prompt tokens with the prefix, the tokens generated, "
                f"the draft's look-ahead and the backend's template or BOS) exceed the target's {self.window}-token window — choose a shorter context"
            )
        if not self.fit.fits:
            return f"{self.fit.describe()} — choose a shorter context or a smaller pair"
        return None


def context_needs(
    backend: KnowsContext,
    prompts: Sequence[Prompt],
    *,
    generated: int,
    look_ahead: int,
    weight_bytes: float,
    usable_bytes: float,
) -> ContextNeeds:
    """What the prefixed ``prompts`` need: positions against the window, memory against ``usable_bytes``."""
    tokens = max(backend.count_tokens(p.text) for p in prompts)
    positions = tokens + generated + look_ahead + 1 + backend.template_tokens()
    held = float(backend.context_bytes(positions))
    pair = getattr(backend, "pair", None)
    counted = "caches, buffers and the draft" if getattr(pair, "draft", None) else "caches and buffers"
    parts = (("weights", weight_bytes), (f"{counted} at {positions} positions", held))
    fit = MemoryFit(weight_bytes + held, usable_bytes, parts)
    return ContextNeeds(tokens, positions, backend.context_window(), fit)


def prefixed_prompts(
    backend: Backend, prompts: Sequence[Prompt], context: int, *, generated: int, look_ahead: int,
    weight_bytes: float, usable_bytes: float,
) -> tuple[Prompt, ...]:  # fmt: skip
    """``prompts`` behind ``context`` tokens of prefix, once the length is known to run here (else one line)."""
    if context <= 0:
        return tuple(prompts)
    if not isinstance(backend, KnowsContext):
        lacking = [name for name in CONTEXT_METHODS if not callable(getattr(backend, name, None))]
        raise SpecdecUsageError(
            f"backend {backend.name!r} lacks {', '.join(lacking)} (the KnowsContext protocol), so it cannot build "
            f"and size a {context}-token prefix — run context comparisons on llama-cpp, llama-server or mlx"
        )
    window = backend.context_window()
    if context + generated + look_ahead + 1 > window:  # before counting a prefix that cannot run
        raise NotMeasurableHere(
            f"context={context} is not measurable here: {context} tokens of context and {generated} generated "
            f"exceed the target's {window}-token window — choose a shorter context"
        )
    prefixed = with_context(prompts, context, backend.count_tokens)
    needs = context_needs(
        backend, prefixed, generated=generated, look_ahead=look_ahead, weight_bytes=weight_bytes,
        usable_bytes=usable_bytes,
    )  # fmt: skip
    if needs.problem is not None:
        raise NotMeasurableHere(f"context={context} is not measurable here: {needs.problem}")
    backend.prepare_context(needs.positions)
    return prefixed


__all__ = ["ContextNeeds", "context_needs", "prefix_text", "prefixed_prompts", "with_context"]
