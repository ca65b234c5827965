"""Drafters for llama-cpp-python's ``Llama(draft_model=...)`` hook.

llama-cpp-python calls ``draft_model(input_ids)`` with the whole context after each
verify step and appends what it returns as draft tokens; it exposes no counts. Here:

* :class:`SecondModelDrafter` — a second GGUF model as drafter (llama-cpp-python has
  none built in). It keeps the draft's own KV cache in step with the target's
  context: each call keeps the common prefix, evaluates only the new tokens, then
  drafts γ tokens greedily one at a time. ``evaluated_tokens`` counts every token
  it ever evaluated, so a test can show it never re-reads the whole prefix.
  It records its own proposals.
* :class:`CountingDrafter` — wraps any other drafter (prompt lookup) and records its
  proposals. Both keep, per call, the context length and the tokens proposed;
  :attr:`proposals` turns them into :class:`Proposal` records after the generation and
  :func:`count_acceptance` compares those with the tokens the target actually emitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_specdec.errors import BackendRuntimeError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from llama_cpp import Llama


def _drafter_base() -> type:
    from llama_cpp.llama_speculative import LlamaDraftModel

    base: type = LlamaDraftModel
    return base


@dataclass(frozen=True)
class Proposal:
    """Draft tokens proposed for positions ``position``, ``position + 1``, …."""

    position: int
    tokens: tuple[int, ...]


def count_acceptance(proposals: Sequence[Proposal], sequence: Sequence[int]) -> tuple[int, int]:
    """``(drafted, accepted)`` over a finished generation.

    ``sequence`` is the prompt followed by every emitted token. A proposal's tokens
    count as drafted up to the end of the sequence (later ones were never judged);
    the accepted ones are its prefix that matches what the target emitted.
    """
    drafted = accepted = 0
    for proposal in proposals:
        judged = proposal.tokens[: max(0, len(sequence) - proposal.position)]
        drafted += len(judged)
        for offset, token in enumerate(judged):
            if sequence[proposal.position + offset] != token:
                break
            accepted += 1
    return drafted, accepted


def proposals_of(raw: Sequence[tuple[int, Any]]) -> list[Proposal]:
    """The :class:`Proposal` records of a drafter's ``(context length, tokens proposed)`` per call, built after
    the generation (building them per call cost 12.5 µs a call in place, 2 % of a second-model SD arm's Python)."""
    return [Proposal(position, tuple(int(t) for t in drafted)) for position, drafted in raw]


def make_counting_drafter(inner: Any) -> Any:
    """A drafter that records each of ``inner``'s proposals (see :class:`Proposal`): inside the decode window
    only the context length and a copy of the array ``inner`` returned."""

    class CountingDrafter(_drafter_base()):  # type: ignore[misc]
        def __init__(self) -> None:
            self.inner = inner
            self.raw: list[tuple[int, Any]] = []

        def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
            drafted: npt.NDArray[np.intc] = inner(input_ids, **kwargs)
            # A copy: prompt lookup returns a view of the target's own token buffer, which later steps rewrite.
            self.raw.append((len(input_ids), drafted.copy()))
            return drafted

        @property
        def proposals(self) -> list[Proposal]:
            return proposals_of(self.raw)

    return CountingDrafter()


def make_second_model_drafter(draft: Llama, num_draft: int) -> Any:
    """A drafter running a second GGUF model greedily, its KV cache kept in step, recording its proposals.

    Its Python runs inside every SD step, so it is kept to the few tokens that changed
    (profiled in place, issue #52: converting the whole context and scanning it from the
    start, looking up ``n_ctx``/``n_vocab`` and wrapping the logits in a new array per
    step cost 2.7 ms of a 64-token generation; a user's bare drafter about 1.8), and to one
    Python frame a call: it records its own proposals rather than sit in a
    :func:`make_counting_drafter`, and reads each greedy token in place.
    """
    import ctypes

    import numpy as np

    vocabulary = draft.n_vocab()
    row_type = ctypes.c_float * vocabulary
    capacity = draft.n_ctx()

    class SecondModelDrafter(_drafter_base()):  # type: ignore[misc]
        def __init__(self) -> None:
            self.draft = draft
            self.num_draft = num_draft
            self.context: list[int] = []  # tokens whose keys and values are in the draft's cache
            self.stable = 0  # the last call's input length: the target never rewrites tokens before it
            self.evaluated_tokens = 0
            self.calls = 0
            self.raw: list[tuple[int, Any]] = []  # (context length, tokens proposed) per call

        def _sync(self, input_ids: Sequence[int] | npt.NDArray[np.intc]) -> None:
            limit = min(len(self.context), len(input_ids))
            common = min(self.stable, limit) if len(input_ids) >= self.stable else 0  # a shorter context: rescan
            while common < limit and self.context[common] == input_ids[common]:
                common += 1
            if common == len(input_ids):  # nothing new: re-evaluate the last token for fresh logits
                common -= 1
            self.draft.n_tokens = common
            tail = input_ids[common:]
            new = tail.tolist() if isinstance(tail, np.ndarray) else [int(t) for t in tail]
            self.draft.eval(new)  # drops the cache past ``common`` first
            del self.context[common:]
            self.context.extend(new)
            self.stable = len(input_ids)
            self.evaluated_tokens += len(new)

        def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
            self.calls += 1
            wanted = min(self.num_draft, capacity - len(input_ids) - 1)
            if wanted <= 0:
                return np.array([], dtype=np.intc)
            self._sync(input_ids)
            proposed = np.empty(wanted, dtype=np.intc)
            draft, context = self.draft, self.context
            for step in range(wanted):
                address = ctypes.cast(draft._ctx.get_logits_ith(-1), ctypes.c_void_p).value
                if not address:  # llama.cpp keeps no logits for that position: one line, never a read of address 0
                    raise BackendRuntimeError("the draft model returned no logits for its last token")
                proposed[step] = token = int(np.argmax(np.frombuffer(row_type.from_address(address), np.float32)))
                if step + 1 < wanted:
                    draft.eval([token])
                    context.append(token)
            self.evaluated_tokens += wanted - 1
            self.raw.append((len(input_ids), proposed))  # a fresh array: no copy needed
            return proposed

        @property
        def proposals(self) -> list[Proposal]:
            return proposals_of(self.raw)

        def prefill(self, prompt: Sequence[int]) -> None:
            """Evaluate the prompt on the draft before the target's first token, as llama.cpp's server does
            (tools/server/server-context.cpp passes every target batch, the prompt's included, through
            common_speculative_process; common/speculative.cpp, draft-simple ``process``): the draft's prefill
            is part of the time to first token, not of decode."""
            self.stable = 0
            self._sync(prompt)

        def reset(self) -> None:
            """Forget the cache and the proposals (a new generation starts)."""
            self.context = []
            self.stable = 0
            self.raw = []
            self.draft.reset()

    return SecondModelDrafter()
