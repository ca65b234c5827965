"""Engagement decides, not decorates: counted drafts, the server's own answers and the probe."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import pytest

from pytest_specdec.analysis import Analysis, EngagementProbe
from pytest_specdec.backends.base import (
    Arm,
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    NotRun,
    SpeculationEvidence,
    TokenBurst,
)
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.stats import Interval


class Server:
    """A server that counts no drafts (like Ollama) and says what it knows."""

    name: ClassVar[str] = "fake"

    def __init__(self, evidence: SpeculationEvidence | None, plain_drafts: int | None = None) -> None:
        self.evidence = evidence
        self.plain_drafts = plain_drafts
        self.pair = ModelPair("t")

    def fingerprint(self) -> Fingerprint:
        return Fingerprint("fake", "fake 1")

    def model_digest(self) -> str:
        return "d"

    def generate(self, request: GenerationRequest) -> GenerationStream:
        yield TokenBurst(tuple(range(request.max_tokens)))
        drafted = self.plain_drafts if not request.arm.speculative else None
        return GenerationStats(prompt_tokens=4, drafted=drafted, server_decode_seconds=1.0, server_decode_tokens=7)

    def close(self) -> None:
        pass


class Knowing(Server):
    def speculation_evidence(self) -> SpeculationEvidence:
        assert self.evidence is not None
        return self.evidence


def ratio(estimate: float, low: float, high: float) -> Interval:
    return Interval(estimate, low, high, 0.95, 8)


LIVE = EngagementProbe(ratio(2.2, 1.9, 2.6), ratio(1.0, 0.97, 1.03), ratio(2.2, 1.9, 2.6))
SLOWER_ON_EASY_TEXT = EngagementProbe(ratio(0.62, 0.47, 0.81), ratio(1.0, 0.97, 1.03), ratio(0.62, 0.47, 0.81))
UNCLEAR = EngagementProbe(ratio(1.02, 0.9, 1.15), ratio(1.0, 0.95, 1.05), ratio(1.02, 0.9, 1.15))
PLAIN_TOO = EngagementProbe(ratio(2.1, 1.8, 2.4), ratio(2.0, 1.7, 2.3), ratio(1.05, 0.95, 1.15))


def engagement(server: Server, probe: EngagementProbe | None) -> tuple[str | None, list[str]]:
    reason, lines, _ = classed_engagement(server, probe)
    return reason, lines


def classed_engagement(server: Server, probe: EngagementProbe | None) -> tuple[str | None, list[str], NotRun | None]:
    plan = ComparisonPlan("code", prompts_for("code"), Arm("plain"), Arm("sd", True, 3), 8, 2, 2, 0.95)
    comparison = run_comparison(server, plan)  # type: ignore[arg-type]
    analysis = Analysis()
    if probe is not None:
        analysis._probes[(server.name, server.pair, "sd", 3)] = probe
    return analysis.engagement(server, comparison)  # type: ignore[arg-type]


TOGGLES = SpeculationEvidence(True, False, "Ollama 0.32.4, GGUF with MTP layers")
UNKNOWN = SpeculationEvidence(None, None, "MLX engine: a drafter shows in no API field")


@pytest.mark.parametrize("probe", [LIVE, SLOWER_ON_EASY_TEXT], ids=["faster", "slower"])
def test_a_sign_of_sd_in_either_direction_confirms(probe: EngagementProbe) -> None:
    reason, lines = engagement(Knowing(UNKNOWN), probe)
    assert reason is None
    assert lines[0].endswith("SD is live (the contrast excludes 1)")


def test_no_sign_is_not_measurable_even_when_the_server_says_sd_toggles() -> None:
    """Never on the server's answers alone: a draft that failed to set up decodes plainly, without a word."""
    reason, lines = engagement(Knowing(TOGGLES), UNCLEAR)
    assert reason is not None
    assert reason.startswith("not measurable: SD not engaged (no sign of SD: contrast 1.02 [0.90, 1.15]")
    assert TOGGLES.reason in reason, "what the server said is named beside the missing sign"
    assert lines, "the probe's line is shown"


@pytest.mark.parametrize("server", [Knowing(UNKNOWN), Server(None)], ids=["unknown", "silent"])
def test_no_sign_and_no_static_evidence_is_not_measurable(server: Server) -> None:
    reason, _ = engagement(server, UNCLEAR)
    assert reason is not None
    assert reason.startswith("not measurable: SD not engaged (no sign of SD: contrast 1.02 [0.90, 1.15]")


def test_a_plain_arm_that_behaves_like_sd_is_not_measurable() -> None:
    reason, _ = engagement(Knowing(UNKNOWN), PLAIN_TOO)
    assert reason is not None
    assert reason.startswith("not measurable: both arms look speculative")


def test_static_evidence_that_an_arm_cannot_differ_decides_without_a_probe() -> None:
    reason, lines = engagement(Knowing(SpeculationEvidence(False, False, "server predates drafting")), None)
    assert reason == "not measurable: SD not engaged (server predates drafting)"
    assert lines == []


def test_the_engines_own_class_of_why_sd_did_not_run_is_said_and_kept() -> None:
    """An engine that says why (llama-server's /slots: asked to speculate, no drafter set up) gives the class."""
    said = SpeculationEvidence(False, False, "the SD server is not speculating", NotRun.DRAFTER_NOT_LOADED)
    reason, _, why = classed_engagement(Knowing(said), None)
    assert reason == (
        "not measurable: SD not engaged — the engine says: drafter not loaded (the SD server is not speculating)"
    )
    assert why is NotRun.DRAFTER_NOT_LOADED
    assert classed_engagement(Knowing(TOGGLES), UNCLEAR)[2] is None, "an engine that says nothing: no class"


def test_a_plain_arm_that_counted_drafts_means_both_arms_speculate() -> None:
    reason, _ = engagement(Server(None, plain_drafts=5), None)
    assert reason == "not measurable: both arms speculate (the plain arm drafted 10 tokens)"


def test_the_probe_line_states_its_intervals() -> None:
    line = UNCLEAR.describe()
    assert "contrast 1.02 [0.90, 1.15]" in line
    assert line.endswith("cannot tell (the contrast interval includes 1)")


def test_the_backends_that_count_drafts_never_need_the_probe() -> None:
    options: Mapping[str, str] = {"engaged": "true"}
    from pytest_specdec.backends.simulated.adapter import SimulatedBackend

    backend = SimulatedBackend(ModelPair("t", "d"), options)
    plan = ComparisonPlan("code", prompts_for("code"), Arm("plain"), Arm("sd", True, 3), 8, 2, 2, 0.95)
    assert Analysis().engagement(backend, run_comparison(backend, plan)) == (None, [], None)


def test_the_probe_shows_progress_after_each_pair() -> None:
    from pytest_specdec.analysis import probe_engagement
    from pytest_specdec.backends.simulated.adapter import SimulatedBackend
    from pytest_specdec.measure import Progress
    from pytest_specdec.render.report import progress_line

    seen: list[Progress] = []
    backend = SimulatedBackend(ModelPair("t", "d"), {"speedup": "1.4"})
    probe_engagement(backend, baseline=Arm("plain"), treatment=Arm("sd", True, 3), max_tokens=8, confidence=0.9,
                     rounds=1, clock=lambda: 0.0, progress=seen.append)  # fmt: skip
    assert [u.done for u in seen] == list(range(1, len(seen) + 1))
    assert seen[-1].done == seen[-1].planned_max == 4
    assert progress_line(seen[1], 12.0) == "specdec sd: engagement probe 2/4"


def test_a_stalled_generation_is_named_with_its_arm_and_the_speedup_is_said_without_it() -> None:
    from pytest_specdec.backends.simulated.adapter import SimulatedBackend

    backend = SimulatedBackend(
        ModelPair("t", "d"), {"speedup": "1.5", "noise": "0.02", "outliers": "0.1", "outlier_arm": "sd", "seed": "1"}
    )
    plan = ComparisonPlan("code", prompts_for("code"), Arm("plain"), Arm("sd", True, 3), 8, 32, 32, 0.95, order="1")
    comparison = run_comparison(backend, plan)
    assert comparison.estimate is not None
    assert comparison.estimate.left_out, "a tenth of the SD generations ran 2-3x slow"
    (stalls,) = [n for n in Analysis().notes(backend, comparison) if n.startswith("left out")]
    assert "the sd arm" in stalls
    assert "the plain arm" not in stalls
    assert comparison.speedup.estimate == pytest.approx(1.5, rel=0.03), "the speedup of generations without stalls"


def test_the_other_reading_says_how_many_prompts_like_these_would_decide() -> None:
    from pytest_specdec.backends.simulated.adapter import SimulatedBackend

    backend = SimulatedBackend(ModelPair("t", "d"), {"speedup": "1.25", "noise": "0.02", "prompt_spread": "0.1"})
    plan = ComparisonPlan(
        "code", prompts_for("code"), Arm("plain"), Arm("sd", True, 3), 8, 32, 32, 0.98, bounds=(1.2,), order="1"
    )
    comparison = run_comparison(backend, plan)
    (other,) = [n for n in Analysis().notes(backend, comparison) if n.startswith("prompts like these")]
    assert "the verdict reads these 4 code prompts" in other
    assert "prompts like these would decide 1.2x" in other
