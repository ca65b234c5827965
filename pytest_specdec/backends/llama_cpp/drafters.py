"""Drafters for llama-cpp-python's ``Llama(draft_model=...)`` hook.

llama-cpp-python calls ``draft_model(input_ids)`` with the whole context after each
verify step and appends what it returns as draft tokens; it exposes no counts. Here:

* :class:`SecondModelDrafter` — a second GGUF model as drafter (llama-cpp-python has
  none built in). It keeps the draft's own KV cache in step with the target's
  context: each call keeps the common prefix, evaluates only the new tokens, then
  drafts γ tokens greedily one at a time. ``evaluated_tokens`` counts every token
  it ever evaluated, so a test can show it never re-reads the whole prefix.
* :class:`CountingDrafter` — wraps any drafter and records every proposal with the
  context length it was made at; :func:`count_acceptance` then compares proposals
  with the tokens the target actually emitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


def make_counting_drafter(inner: Any) -> Any:
    """A drafter that records each of ``inner``'s proposals (see :class:`Proposal`)."""

    class CountingDrafter(_drafter_base()):  # type: ignore[misc]
        def __init__(self) -> None:
            self.inner = inner
            self.proposals: list[Proposal] = []

        def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
            drafted: npt.NDArray[np.intc] = inner(input_ids, **kwargs)
            self.proposals.append(Proposal(len(input_ids), tuple(int(t) for t in drafted)))
            return drafted

    return CountingDrafter()


def make_second_model_drafter(draft: Llama, num_draft: int) -> Any:
    """A drafter running a second GGUF model greedily, its KV cache kept in step."""
    import numpy as np

    class SecondModelDrafter(_drafter_base()):  # type: ignore[misc]
        def __init__(self) -> None:
            self.draft = draft
            self.num_draft = num_draft
            self.context: list[int] = []  # tokens whose keys and values are in the draft's cache
            self.evaluated_tokens = 0
            self.calls = 0

        def _sync(self, input_ids: Sequence[int]) -> None:
            common = 0
            limit = min(len(self.context), len(input_ids))
            while common < limit and self.context[common] == input_ids[common]:
                common += 1
            if common == len(input_ids):  # nothing new: re-evaluate the last token for fresh logits
                common -= 1
            self.draft.n_tokens = common
            new = [int(t) for t in input_ids[common:]]
            self.draft.eval(new)  # drops the cache past ``common`` first
            self.context = [*self.context[:common], *new]
            self.evaluated_tokens += len(new)

        def _greedy_next(self) -> int:
            logits = self.draft._ctx.get_logits_ith(-1)
            row = np.ctypeslib.as_array(logits, shape=(self.draft.n_vocab(),))
            return int(np.argmax(row))

        def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
            self.calls += 1
            room = self.draft.n_ctx() - len(input_ids) - 1
            wanted = min(self.num_draft, room)
            if wanted <= 0:
                return np.array([], dtype=np.intc)
            self._sync([int(t) for t in input_ids])
            proposed: list[int] = []
            for step in range(wanted):
                token = self._greedy_next()
                proposed.append(token)
                if step + 1 < wanted:
                    self.draft.eval([token])
                    self.context.append(token)
                    self.evaluated_tokens += 1
            return np.array(proposed, dtype=np.intc)

        def prefill(self, prompt: Sequence[int]) -> None:
            """Evaluate the prompt on the draft before the target's first token, as llama.cpp's server does
            (tools/server/server-context.cpp passes every target batch, the prompt's included, through
            common_speculative_process; common/speculative.cpp, draft-simple ``process``): the draft's prefill
            is part of the time to first token, not of decode."""
            self._sync(prompt)

        def reset(self) -> None:
            """Forget the cache (a new generation starts)."""
            self.context = []
            self.draft.reset()

    return SecondModelDrafter()
