"""Default arms are what a backend's users get: its own draft length unless a γ is given, and a given γ is a tuned
arm, said so. (llama-server's n-gram defaults: tests/backends/test_llama_server_real.py.)"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python's prompt lookup")

RUN = ["--backend=llama-cpp", "--specdec-backend-option=spec=prompt-lookup", "--specdec-min-trials=2",
       "--specdec-max-trials=2", "--specdec-max-tokens=8", "--specdec-notes=all", "-p", "no:cacheprovider",
       "--specdec-json=run.json"]  # fmt: skip
TEST = """
def test_sd(specdec):
    specdec.compare(category="copy")
"""


def test_prompt_lookup_drafts_the_librarys_own_length_unless_tuned(pytester: pytest.Pytester) -> None:
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    own = LlamaPromptLookupDecoding().num_pred_tokens  # what a user of the library gets
    pytester.makepyfile(TEST)
    pytester.runpytest(*RUN)
    (default,) = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    assert default["conditions"]["num_draft"] == own
    assert not any("a tuned arm" in note for note in default["notes"])
    result = pytester.runpytest(*RUN, "--specdec-num-draft=3")
    (tuned,) = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    assert tuned["conditions"]["num_draft"] == 3
    assert f"a tuned arm: γ=3, where llama-cpp's users get {own} by default" in tuned["notes"]
    result.stdout.fnmatch_lines(["*a tuned arm: γ=3*"])


def test_the_arm_router_answers_for_the_arm_that_drafts() -> None:
    """Arms on backends of their own (--specdec-plain-runtime): the treatment's backend says how it drafts."""
    from pytest_specdec.backends.arms import ArmRouter
    from pytest_specdec.backends.base import ModelPair

    class Member:
        name = "member"
        pair = ModelPair("t")

        def __init__(self, own: int | None, adapts: bool) -> None:
            self.own, self.adapts = own, adapts

        def default_num_draft(self) -> int | None:
            return self.own

        def adapts_draft_length(self) -> bool:
            return self.adapts

    router = ArmRouter({"plain": Member(None, False), "sd": Member(10, True)})  # type: ignore[dict-item]
    assert (router.default_num_draft(), router.adapts_draft_length()) == (10, True)
    router = ArmRouter({"plain": Member(7, True), "sd": Member(None, False)})  # type: ignore[dict-item]
    assert (router.default_num_draft(), router.adapts_draft_length()) == (None, False)


def test_prompt_lookup_is_not_a_draft_model_whatever_the_pair_holds() -> None:
    from pytest_specdec.backends import load_backend
    from pytest_specdec.backends.kinds import SpeculationKind, run_kind
    from pytest_specdec.config import profile_pairs

    pair = profile_pairs("embedded")["llama-cpp"]  # it has a draft GGUF
    lookup = load_backend("llama-cpp", pair, {"spec": "prompt-lookup"})
    drafting = load_backend("llama-cpp", pair, {})
    try:
        kinds = (SpeculationKind.DRAFT_MODEL, SpeculationKind.NGRAM_LOOKUP)
        assert run_kind(kinds, lookup, pair.draft) is SpeculationKind.NGRAM_LOOKUP
        assert run_kind(kinds, drafting, pair.draft) is SpeculationKind.DRAFT_MODEL
    finally:
        lookup.close()
        drafting.close()
