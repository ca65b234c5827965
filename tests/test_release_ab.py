"""Old release against new, the same night: the change interval, the metric cross-check, two worker processes."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from pytest_specdec.backends import release_pair
from pytest_specdec.backends.base import Arm, Fingerprint, GenerationRequest, ModelPair
from pytest_specdec.backends.release_pair import InProcessReleases, ReleasePair, WorkerProcess
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError
from pytest_specdec.measure import ComparisonPlan
from pytest_specdec.release_ab import ReleaseAB, ab_looks, run_release_ab
from pytest_specdec.stats import Interval

MACHINE = {"noise": "0.05", "prompt_seed": "3"}


def plan(pairs: int = 16, max_tokens: int = 16) -> ComparisonPlan:
    return ComparisonPlan("code", prompts_for("code"), Arm("plain"), Arm("sd", speculative=True, num_draft=3),
                          max_tokens=max_tokens, min_trials=pairs, max_trials=pairs, confidence=0.98)  # fmt: skip


def release(speedup: float, seed: int, **options: str) -> SimulatedBackend:
    return SimulatedBackend(ModelPair("t", "d"), {**MACHINE, "speedup": str(speedup), "seed": str(seed), **options})


def test_a_real_change_is_seen_and_a_machine_that_moved_both_releases_is_not() -> None:
    changed = run_release_ab(InProcessReleases(release(1.0, 1), release(1.5, 2)), plan(), clock=lambda: 0.0)
    assert changed.change.low > 1.0
    assert changed.old.low < 1.0 < changed.old.high
    assert changed.new.low > 1.3
    together = run_release_ab(InProcessReleases(release(1.5, 1), release(1.5, 2)), plan(), clock=lambda: 0.0)
    assert together.change.low < 1.0 < together.change.high, "both releases moved: no change between them"
    assert together.new.low > 1.3
    assert together.metric_change is None, "a clock that stands still has nothing to cross-check"


def looking(first: int, cap: int) -> ComparisonPlan:
    return ComparisonPlan("code", prompts_for("code"), Arm("plain"), Arm("sd", speculative=True, num_draft=3),
                          max_tokens=16, min_trials=first, max_trials=cap, confidence=0.98)  # fmt: skip


def test_a_run_with_looks_stops_when_settled_and_spends_its_error_over_the_looks() -> None:
    seen: list[int] = []

    def never(ab: ReleaseAB) -> bool:
        seen.append(ab.pairs)
        return False

    last = run_release_ab(InProcessReleases(release(1.0, 1), release(1.2, 2)), looking(8, 64), lambda: 0.0, never)
    assert seen == [8, 16, 32, 64], "a look at the first block and each doubling up to the cap"
    assert last.pairs == 64
    stopped = run_release_ab(
        InProcessReleases(release(1.0, 1), release(1.2, 2)), looking(8, 64), lambda: 0.0, lambda ab: ab.pairs >= 16
    )
    assert stopped.pairs == 16, "the first look the caller accepts ends the run"
    # 16 pairs read at the second of four looks are wider than 16 pairs read as the only look (z 3.52 against
    # 2.33 at a one-sided 1 %; the pairs' own spread differs a little between the runs).
    alone = run_release_ab(InProcessReleases(release(1.0, 1), release(1.2, 2)), looking(16, 16), lambda: 0.0)

    def width(interval: Interval) -> float:
        return math.log(interval.high / interval.low)

    assert width(stopped.new) > 1.3 * width(alone.new)
    assert width(stopped.change) > 1.2 * width(alone.change)


def test_a_release_whose_counters_changed_is_caught_by_the_client_clock() -> None:
    """The new release reports SD's decode in half the time it took: its server rate moves against the clock."""
    # 4 ms a token: long enough that a loaded CI machine's scheduling jitter is small against it
    paced = {"plain_tps": "250", "realtime": "true"}
    ab = run_release_ab(
        InProcessReleases(release(1.0, 1, **paced), release(1.0, 2, counter_scale="0.5", **paced)), plan(16, 12)
    )
    assert ab.new.estimate == pytest.approx(2.0, rel=0.1), "by the server's own word SD doubled"
    assert ab.metric_change is not None
    assert ab.metric_change.high < 0.95 or ab.metric_change.low > 1.05


def test_two_releases_run_in_two_worker_processes() -> None:
    options = {"speedup": "1.4", "noise": "0.02"}
    pair = ReleasePair(sys.executable, sys.executable, "simulated", ModelPair("t", "d"), options)
    try:
        assert pair.fingerprint().release == "simulated 1.0 → simulated 1.0"
        ab = run_release_ab(pair, plan(8), clock=lambda: 0.0)
    finally:
        pair.close()
    assert ab.pairs == 8
    assert ab.new.estimate == pytest.approx(1.4, rel=0.1)


def test_a_worker_that_cannot_load_is_one_line() -> None:
    with pytest.raises(ModelLoadError, match="could not load simulated: SpecdecUsageError: backend option"):
        ReleasePair(sys.executable, sys.executable, "simulated", ModelPair("t", "d"), {"speedup": "fast"})


def test_looks_are_whole_blocks_doubling_from_the_first_to_the_cap() -> None:
    assert ab_looks(96, 768, 8) == (96, 192, 384, 768)
    assert ab_looks(96, 96, 8) == (96,)
    assert ab_looks(96, 300, 8) == (96, 192, 296), "the cap rounded down to whole blocks is the last look"
    assert ab_looks(5, 7, 8) == (8,), "never less than one block"
    assert ab_looks(100, 100, 8) == (96,), "one look when the first is the cap"


def test_a_worker_that_stops_answering_is_stopped_at_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that says it is ready and then hangs mid-request cannot hold the confirm step for ever (#51)."""
    hung = tmp_path / "python"
    hung.write_text('#!/bin/sh\necho \'{"ready": "stuck 1.0"}\'\nexec sleep 3600\n')
    hung.chmod(0o755)
    monkeypatch.setattr(release_pair, "ANSWER_TIMEOUT_S", 0.5)
    worker = WorkerProcess(str(hung), "simulated", ModelPair("t", "d"), {})
    assert worker.release == "stuck 1.0"
    stream = worker.generate(GenerationRequest("a prompt", Arm("plain"), 8))
    with pytest.raises(BackendRuntimeError, match=r"^the worker process answered nothing for 0\.5 s — it was stopped$"):
        next(stream)
    worker.close()


@pytest.mark.parametrize(("every_token", "waited"), [(True, "0.2"), (False, "0.6")])
def test_the_rest_of_a_measured_generation_gets_the_time_a_burst_a_token_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every_token: bool, waited: str
) -> None:
    """A measured generation's rest comes in one message after the first token: its deadline is the per-burst
    one times the tokens still to come (0.2 s x 3 here), so a slow decode is not cut off as a hung worker."""
    slow = tmp_path / "python"
    slow.write_text(
        '#!/bin/sh\necho \'{"ready": "slow 1.0"}\'\nread line\necho \'{"burst": [1], "draft": null}\'\nexec sleep 3600\n'
    )
    slow.chmod(0o755)
    monkeypatch.setattr(release_pair, "ANSWER_TIMEOUT_S", 0.2)
    worker = WorkerProcess(str(slow), "simulated", ModelPair("t", "d"), {})
    stream = worker.generate(GenerationRequest("a prompt", Arm("plain"), 4, every_token=every_token))
    assert next(stream).token_ids == (1,)
    with pytest.raises(BackendRuntimeError, match=rf"^the worker process answered nothing for {waited} s — "):
        next(stream)
    worker.close()


class _Said:
    """A backend that only says which release it is."""

    pair = ModelPair("t", "d")

    def __init__(self, release: str, versions: dict[str, str]) -> None:
        self._fingerprint = Fingerprint("mlx", release, versions)

    def fingerprint(self) -> Fingerprint:
        return self._fingerprint

    def close(self) -> None:
        return None


@pytest.mark.parametrize(
    ("old", "new", "same"),
    [
        (
            ("mlx-lm 0.33.0", {"mlx-lm": "0.33.0", "mlx": "0.32.4"}),
            ("mlx-lm 0.33.0", {"mlx-lm": "0.33.0", "mlx": "0.32.4"}),
            "mlx-lm 0.33.0",
        ),
        # only mlx moved: the release label is the same, the environments are not — the A/B can tell them apart
        (
            ("mlx-lm 0.33.0", {"mlx-lm": "0.33.0", "mlx": "0.32.4"}),
            ("mlx-lm 0.33.0", {"mlx-lm": "0.33.0", "mlx": "0.33.1"}),
            None,
        ),
        (("llama.cpp unknown build", {}), ("llama.cpp unknown build", {}), None),  # unknown is never "the same"
    ],
)
def test_an_old_release_is_tonights_only_when_release_and_versions_match_and_are_known(
    old: tuple[str, dict[str, str]], new: tuple[str, dict[str, str]], same: str | None
) -> None:
    pair = InProcessReleases(_Said(*old), _Said(*new))  # type: ignore[arg-type]
    assert pair.same_release() == same
