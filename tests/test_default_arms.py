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
