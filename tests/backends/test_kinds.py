"""Claims select backends by what they do: the SD kinds a spec declares, and the kind this run's arm drafts with."""

from __future__ import annotations

import doctest

import pytest

import pytest_specdec.backends.kinds
import pytest_specdec.backends.llama_server.knobs
import pytest_specdec.seed.document
from pytest_specdec.backends import builtin_backends
from pytest_specdec.backends.kinds import SpeculationKind, run_kind
from pytest_specdec.backends.llama_server.knobs import kind_of
from pytest_specdec.seed.document import CLAIMS, claims_run_by

DRAFT, NGRAM, MTP, BLOCK, EARLY = (SpeculationKind.DRAFT_MODEL, SpeculationKind.NGRAM_LOOKUP,
                                   SpeculationKind.MTP_HEAD, SpeculationKind.BLOCK_DRAFTER, SpeculationKind.EARLY_EXIT)  # fmt: skip


class SaysItsKind:
    def speculation_kind(self) -> SpeculationKind:
        return MTP


@pytest.mark.parametrize("module", [pytest_specdec.backends.kinds, pytest_specdec.backends.llama_server.knobs,
                                    pytest_specdec.seed.document])  # fmt: skip
def test_the_docstring_examples_hold(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]


def test_the_run_kind_is_the_backends_word_else_follows_the_pair() -> None:
    assert run_kind((DRAFT, NGRAM), SaysItsKind(), "draft.gguf") is MTP, "what the backend says wins"
    assert run_kind((DRAFT, NGRAM), object(), "draft.gguf") is DRAFT
    assert run_kind((DRAFT, NGRAM), object(), None) is NGRAM, "no draft file: prompt lookup"
    assert run_kind((DRAFT,), object(), None) is DRAFT, "its only kind"
    assert run_kind((), object(), "draft.gguf") is None, "declares none"


def test_llama_server_spec_types_map_to_kinds() -> None:
    said = {t: kind_of(t) for t in ("draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "ngram-simple",
                                     "ngram-mod", "ngram-cache")}  # fmt: skip
    assert said == {"draft-simple": DRAFT, "draft-eagle3": DRAFT, "draft-mtp": MTP, "draft-dflash": BLOCK,
                    "ngram-simple": NGRAM, "ngram-mod": NGRAM, "ngram-cache": NGRAM}  # fmt: skip


def test_claims_select_by_kind_or_family_never_by_name() -> None:
    d = CLAIMS["d"]
    assert d.applies("anything", DRAFT)
    assert d.applies("mlx-lm", EARLY), "an early exit is passed to mlx-lm as its draft_model too"
    assert not d.applies("llama.cpp", NGRAM), "prompt lookup is not a draft model"
    assert not d.applies("mlx-lm", None)
    assert CLAIMS["c"].applies("llama.cpp", NGRAM)
    assert not CLAIMS["c"].applies("vllm", DRAFT)
    assert CLAIMS["g"].applies(None, None), "a claim about any backend"
    assert claims_run_by("vllm", [DRAFT]) == ["d"]
    assert claims_run_by("mlx-lm", [EARLY]) == ["d"]
    assert claims_run_by("llama.cpp", [NGRAM]) == ["c"]
    assert claims_run_by(None, []) == []
    assert (CLAIMS["c"].applies_to, CLAIMS["g"].applies_to) == ("llama.cpp", "any backend")


def test_every_builtin_backend_declares_its_kinds() -> None:
    declared = {name: spec.kinds for name, spec in builtin_backends().items()}
    assert all(declared.values()), declared
    assert declared["mlx"] == (DRAFT, EARLY)
    assert MTP in declared["ollama"]
    assert MTP in declared["mtplx"]


def test_mlx_says_early_exit_for_the_gemma_profile() -> None:
    pytest.importorskip("mlx_lm")
    from pytest_specdec.backends.base import ModelPair
    from pytest_specdec.backends.mlx.adapter import MlxBackend

    early = object.__new__(MlxBackend)
    early._pair = ModelPair("pypi:gemma", "pypi:gemma#early-exit=15")  # the attribute speculation_kind reads
    assert early.speculation_kind() is EARLY
    early._pair = ModelPair("embedded:target", "embedded:draft-aligned")
    assert early.speculation_kind() is DRAFT
