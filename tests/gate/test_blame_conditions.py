"""The confirm step re-measures a flip as it ran, under its record's conditions (sampled, end to end, behind a
context); an acceptance flip, and any flip the old-versus-new run cannot finish, keeps its flip."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_specdec.axes import Conditions
from pytest_specdec.axes.sampling import Sampling
from pytest_specdec.backends import profile_pairs
from pytest_specdec.backends.base import ModelPair, OldRelease
from pytest_specdec.backends.release_pair import InProcessReleases, ReleasePair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.gate import ab_run as blame_module
from pytest_specdec.gate.ab_call import Call
from pytest_specdec.gate.ab_run import _plan, ab_flips
from pytest_specdec.gate.legs import LegConfig
from pytest_specdec.measure import ComparisonPlan
from pytest_specdec.stats import Verdict
from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, baseline_key
from pytest_specdec.store.records import BoundRecord, ComparisonRecord, Provenance


@pytest.mark.parametrize(
    "conditions",
    [
        {"sampling": Sampling(0.7)},
        {"metric": "end-to-end"},
        {"context": 8192},
        {"sampling": Sampling(0.7, 0.95), "context": 1000},
    ],
)
def test_the_plan_of_a_flips_re_measurement_carries_its_records_conditions(
    make_record: Callable[..., ComparisonRecord], conditions: dict[str, object]
) -> None:
    record = make_record("code", 1.5, "refuted", None)
    assert _plan(record, 768, {}).conditions == record.conditions  # greedy decode at a short prompt, γ=3
    flipped = replace(record, conditions=record.conditions.with_(**conditions))
    assert _plan(flipped, 768, {}).conditions == flipped.conditions
    assert _plan(flipped, 768, {}).treatment.num_draft == 3
    assert (_plan(flipped, 768, {}).min_trials, _plan(flipped, 768, {}).max_trials) == (96, 768), (
        "looks from 96 to the cap"
    )


def test_a_flip_on_the_users_prompt_set_is_measured_again_on_its_texts_only_if_their_digest_is_unchanged(
    make_record: Callable[..., ComparisonRecord],
) -> None:
    from pytest_specdec.embedded.prompt_sets import PromptSet, inline_set
    from pytest_specdec.errors import SpecdecUsageError

    mine = PromptSet("support", "prose", inline_set(["Reply politely.", "Say sorry."], "prose").prompts)
    record = make_record("prose", 1.5, "refuted", None)
    record = replace(record, scope={**record.scope, "prompts": "given", "prompt_set": "support",
                                    "prompt_digest": mine.digest})  # fmt: skip
    assert _plan(record, 96, {"support": mine}).prompts == mine.prompts
    edited = replace(mine, prompts=inline_set(["Reply politely!", "Say sorry."], "prose").prompts)
    for sets in ({}, {"support": edited}):
        with pytest.raises(SpecdecUsageError, match="prompt set 'support' it measured is not in the prompt file"):
            _plan(record, 96, sets)


@pytest.mark.parametrize(
    "conditions",
    [{"sampling": Sampling(0.7)}, {"context": 512}, {"metric": "end-to-end"}],
    ids=["sampled", "long-context", "end-to-end"],
)
def test_the_release_ab_runs_for_a_sampled_long_context_or_end_to_end_flip_on_llama_cpp(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord], monkeypatch: pytest.MonkeyPatch,
    conditions: dict[str, object],
) -> None:  # fmt: skip
    """Both releases (here one interpreter twice, as workers) re-measure the flip as it ran: its very conditions."""
    pytest.importorskip("llama_cpp")
    pair = profile_pairs("embedded")["llama-cpp"]
    made = replace(
        make_record("code", 1.1, "holds", None), backend="llama-cpp", target=pair.target, draft=pair.draft,
        scope={"prompts": "continuation", "max_tokens": "12"}, conditions=Conditions({"num_draft": 3, **conditions}),
    )  # fmt: skip
    store = BaselineStore(tmp_path, "Apple-M1-Max-64GB")
    store.write("llama-cpp", {baseline_key(made): BaselineEntry(made, Provenance.MEASURED, "2026-11-01")})
    tonight = replace(
        made, judgement=replace(made.judgement, bounds=(BoundRecord("speedup", "max", 1.3, Verdict.REFUTED),))
    )
    seen: list[tuple[list[int], ComparisonPlan]] = []
    real = blame_module.run_release_ab

    def spy(backend: Any, plan: ComparisonPlan, **kwargs: Any) -> Any:  # the prompts' tokens as they run
        seen.append(([backend.count_tokens(p.text) for p in plan.prompts], plan))
        return real(backend, plan, **kwargs)

    monkeypatch.setattr(blame_module, "run_release_ab", spy)
    # One interpreter twice (this machine has one llama-cpp-python): said to be two releases, as a lock's would.
    monkeypatch.setattr(ReleasePair, "same_release", lambda self: None)
    monkeypatch.setattr(blame_module, "AB_PAIRS", 8)  # two blocks of the four prompts: a test, not a night
    old = OldRelease("llama-cpp-python (last night's)", python=sys.executable)
    calls = ab_flips([tonight], LegConfig("llama-cpp"), old, new_python=sys.executable, arguments=[], out=tmp_path,
                     baselines=tmp_path, machine_class="Apple-M1-Max-64GB",
                     pairs={baseline_key(tonight): (8, "8 pairs")})  # fmt: skip
    ((counted, plan),) = seen
    assert plan.conditions == tonight.conditions
    (call,) = calls.values()
    assert "could not start" not in call.line, call.line
    assert "failed" not in call.line, call.line
    short = 64  # the longest prompt of the suite, and then some
    if "context" in conditions:  # every prompt behind 512 tokens of prefix, cut by tonight's tokenizer
        assert all(512 <= n <= 512 + short for n in counted), counted
    else:
        assert max(counted) < short, counted


def _with_acceptance(record: ComparisonRecord, verdict: str) -> ComparisonRecord:
    bounds = (*record.judgement.bounds, BoundRecord("acceptance", "min", 0.6, Verdict(verdict)))
    return replace(record, judgement=replace(record.judgement, bounds=bounds))


def test_an_acceptance_flip_stands_without_an_old_versus_new_run(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    """Acceptance does not move with the machine's speed: the A/B (speedup only) cannot clear it, and is not run."""
    accepted = _with_acceptance(make_record("code", 1.1, "holds", None), "holds")
    store = BaselineStore(tmp_path, "Apple-M1-Max-64GB")
    store.write("mlx", {baseline_key(accepted): BaselineEntry(accepted, Provenance.MEASURED, "2026-11-01")})
    tonight = _with_acceptance(make_record("code", 1.1, "holds", None), "refuted")
    never = OldRelease("mlx-lm 0.32.2", python="/nonexistent/python")  # a worker started here would fail
    calls = ab_flips([tonight], LegConfig("mlx"), never, new_python="/nonexistent/python", arguments=[],
                     out=tmp_path, baselines=tmp_path, machine_class="Apple-M1-Max-64GB")  # fmt: skip
    (call,) = calls.values()
    assert call.call is Call.RELEASE_CHANGED
    assert (
        call.line
        == "acceptance min=0.6 flipped, and the old-versus-new run measures the speedup only — the flip stands"
    )


def test_an_old_versus_new_run_that_breaks_in_any_way_leaves_the_flip_standing(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_pipe(*_: object, **__: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")  # the old release's worker died between two requests

    monkeypatch.setattr(blame_module, "run_release_ab", broken_pipe)
    monkeypatch.setattr(
        blame_module, "ReleasePair",
        lambda *_, **__: SimpleNamespace(close=lambda: None, same_release=lambda: None),
    )  # fmt: skip
    record = make_record("code", 1.41, "refuted", None)
    old = OldRelease("mlx-lm 0.32.2")
    calls = ab_flips([record], LegConfig("mlx"), old, new_python=sys.executable, arguments=[], out=tmp_path,
                     baselines=tmp_path, machine_class="Apple-M1-Max-64GB")  # fmt: skip
    (call,) = calls.values()
    assert call.call is Call.RELEASE_CHANGED
    assert call.line == "the old-versus-new run failed (BrokenPipeError: [Errno 32] Broken pipe) — the flip stands"


def test_a_flip_under_several_streams_at_once_stands_with_the_reason_in_one_line(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release workers take one request at a time: a concurrency flip is not re-measured, and is said so."""
    both = [SimulatedBackend(ModelPair("t", "d"), {}) for _ in range(2)]
    monkeypatch.setattr(blame_module, "ReleasePair", lambda *_, **__: InProcessReleases(*both))
    record = make_record("code", 1.41, "refuted", None)
    flipped = replace(record, conditions=record.conditions.with_(concurrency=4))
    calls = ab_flips([flipped], LegConfig("mlx"), OldRelease("mlx-lm 0.32.2"), new_python=sys.executable,
                     arguments=[], out=tmp_path, baselines=tmp_path, machine_class="Apple-M1-Max-64GB")  # fmt: skip
    (call,) = calls.values()
    assert call.call is Call.RELEASE_CHANGED
    assert call.line == (
        "the old-versus-new run could not start (concurrency=4: the old-versus-new workers take one request at a "
        "time, so 4 streams at once are not re-measured release against release) — the flip stands"
    )


def test_an_old_environment_that_runs_tonights_release_is_refused_and_the_flip_stands(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock that pins tonight's release builds an "old" environment that is tonight's: the A/B could only say
    "the machine moved"; it is refused in one line and the flip stands."""
    same = [SimulatedBackend(ModelPair("t", "d"), {"release": "0.33.0"}) for _ in range(2)]
    monkeypatch.setattr(blame_module, "ReleasePair", lambda *_, **__: InProcessReleases(*same))
    record = make_record("code", 1.41, "refuted", None)
    calls = ab_flips([record], LegConfig("mlx"), OldRelease("mlx-lm 0.32.2"), new_python=sys.executable,
                     arguments=[], out=tmp_path, baselines=tmp_path, machine_class="Apple-M1-Max-64GB")  # fmt: skip
    (call,) = calls.values()
    assert call.call is Call.RELEASE_CHANGED
    assert call.line.startswith("the old-versus-new run could not start (the old environment runs tonight's release (")
    assert call.line.endswith(") — the flip stands")


def test_a_flip_on_conversations_is_not_sent_to_text_only_release_workers(
    make_record: Callable[..., ComparisonRecord],
) -> None:
    from pytest_specdec.embedded.prompt_sets import PromptSet, inline_set
    from pytest_specdec.errors import SpecdecUsageError

    for record, sets in (
        (make_record("chat", 1.5, "refuted", None), {}),  # the built-in conversations
        (replace(make_record("custom", 1.5, "refuted", None), scope={"prompts": "given", "prompt_set": "talk"}),
         {"talk": PromptSet("talk", "chat", inline_set([[{"role": "user", "content": "Hi."}]], "chat").prompts)}),
    ):  # fmt: skip
        with pytest.raises(SpecdecUsageError, match="conversations, which the old-versus-new workers send as text"):
            _plan(record, 96, sets)
