"""The kinds of speculative decoding a backend can run, and the one this run's SD arm uses.

A claim of the document is about a kind of SD (claim d: "mlx-lm's draft model"), not about a
backend's name, so claims select backends by the kinds they declare (``BackendSpec.kinds``):
any backend, in-tree or a third party's, that declares a draft model runs claim d unchanged.

A backend whose kind depends on how it is configured (a draft file or none, a server's
``--spec-type``) says which one it runs through :class:`KnowsSpeculationKind`; otherwise the
run's kind follows from its declaration and the model pair (:func:`run_kind`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, runtime_checkable


class SpeculationKind(StrEnum):
    """Where the drafted tokens come from."""

    DRAFT_MODEL = "draft model"  # a second, smaller model (mlx-lm's draft_model, llama.cpp's -md)
    MTP_HEAD = (
        "MTP head"  # the target's own multi-token-prediction heads (Ollama auto-MTP, MTPLX, --spec-type draft-mtp)
    )
    NGRAM_LOOKUP = "n-gram lookup"  # tokens copied from the context (prompt lookup, llama-server's ngram-*)
    BLOCK_DRAFTER = "block drafter"  # a drafter proposing a block at once (DFlash, mlx-vlm's block drafters)
    EARLY_EXIT = "early exit"  # the target's own first layers draft (self-speculation)


@runtime_checkable
class KnowsSpeculationKind(Protocol):
    """A backend whose SD arm's kind depends on its configuration.

    Example::

        class MyServer:
            def speculation_kind(self) -> SpeculationKind:
                return SpeculationKind.MTP_HEAD if self._spec_type == "draft-mtp" else SpeculationKind.DRAFT_MODEL
    """

    def speculation_kind(self) -> SpeculationKind:
        """The kind of SD this instance's speculative arm runs."""
        ...


def run_kind(declared: Sequence[SpeculationKind], backend: object, draft: str | None) -> SpeculationKind | None:
    """The kind this run's SD arm uses: the backend's own word, else a draft model when the pair has a draft and
    the backend declares one, else the first other kind it declares, else its only one (``None``: it declares
    none).

    >>> run_kind((SpeculationKind.DRAFT_MODEL, SpeculationKind.NGRAM_LOOKUP), object(), None)
    <SpeculationKind.NGRAM_LOOKUP: 'n-gram lookup'>
    """
    if isinstance(backend, KnowsSpeculationKind):
        return backend.speculation_kind()
    if draft and SpeculationKind.DRAFT_MODEL in declared:
        return SpeculationKind.DRAFT_MODEL
    without_draft = [kind for kind in declared if kind is not SpeculationKind.DRAFT_MODEL]
    first: list[SpeculationKind | None] = [*without_draft, *declared, None]
    return first[0]
