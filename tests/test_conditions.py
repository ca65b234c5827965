"""Conditions: one frozen value per comparison, every axis registered in its own module, stored as an object,
read back equal, keyed as before — and the files written before it existed read with the keys they had."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_specdec.axes import Conditions, registered_axes
from pytest_specdec.axes.num_draft import MAX_DRAFT
from pytest_specdec.axes.sampling import Sampling
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, baseline_key, read_baseline_file
from pytest_specdec.store.files import dumps, load_run
from pytest_specdec.store.nights import read_nights
from pytest_specdec.store.records import MOVED_FROM_SCOPE, ComparisonRecord, Provenance, RunRecord, Unmeasured

REPO = Path(__file__).resolve().parents[1]
SIM = ("--backend=simulated", "-p", "no:cacheprovider")

# One strategy per axis: a new axis adds its own here (the next test says so).
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "num_draft": st.integers(1, MAX_DRAFT),
    "sampling": st.builds(
        Sampling,
        st.floats(0.01, 5.0, allow_nan=False).map(lambda t: round(t, 3)),
        st.floats(0.01, 1.0, allow_nan=False).map(lambda p: round(p, 3)),
    )
    | st.just(Sampling()),
    "metric": st.sampled_from(["decode", "end-to-end"]),
    "context": st.integers(0, 1 << 20),
    "concurrency": st.integers(1, 64),
    "prompt_set": st.from_regex(r"[a-z][a-z0-9-]{0,8}#[0-9a-f]{12}", fullmatch=True),
}


def test_every_registered_axis_has_a_strategy_here_and_a_module_of_its_own() -> None:
    names = [axis.name for axis in registered_axes()]
    assert set(names) == set(VALUES), "a new axis needs a strategy in VALUES"
    assert len({type(axis).__module__ for axis in registered_axes()}) == len(names)


conditions = st.fixed_dictionaries({}, optional=VALUES).map(Conditions)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chosen=conditions)
def test_conditions_round_trip_through_results_and_baseline_files_with_equal_keys(
    chosen: Conditions, make_record: Callable[..., ComparisonRecord], tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("round-trip")
    record = replace(make_record("code", 1.2, "holds", None), conditions=chosen)
    run = RunRecord("Test-Machine", "2026-12-02T00:00:00+00:00", "2026-12-02T00:01:00+00:00", (record,))
    (folder / "run.json").write_text(dumps(run), encoding="utf-8")
    (back,) = load_run(folder / "run.json").comparisons
    assert back.conditions == chosen
    assert baseline_key(back) == baseline_key(record)
    store = BaselineStore(folder / "baselines", "Test-Machine")
    store.write("mlx", {baseline_key(record): BaselineEntry(record, Provenance.MEASURED, "2026-12-02")})
    entry = BaselineStore(folder / "baselines", "Test-Machine").lookup(record)
    assert entry is not None
    assert entry.result.conditions == chosen
    assert Conditions.load(json.loads(json.dumps(chosen.dump()))) == chosen


def test_defaults_are_left_out_so_a_comparison_under_defaults_keeps_its_key(
    make_record: Callable[..., ComparisonRecord],
) -> None:
    record = make_record("code", 1.2, "holds", None)
    spelled = replace(record, conditions=record.conditions.with_(sampling=Sampling(), metric="decode", context=0))
    assert spelled.conditions == record.conditions
    assert baseline_key(spelled) == baseline_key(record)
    assert "[code, γ=3, " in baseline_key(record)


def test_a_file_naming_an_axis_this_release_does_not_know_is_one_line(tmp_path: Path, sample_run: RunRecord) -> None:
    document = json.loads(dumps(sample_run))
    document["comparisons"][0]["conditions"]["warmth"] = 3
    (tmp_path / "run.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(SpecdecUsageError, match="conditions name the axis 'warmth', which this pytest-specdec"):
        load_run(tmp_path / "run.json")


def _digest(paths: list[Path]) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


def test_files_written_before_conditions_were_one_object_read_with_the_keys_they_were_stored_under() -> None:
    """The shipped H200 baselines, a ``--specdec-json`` file and the history, as earlier releases wrote them."""
    shipped = sorted((REPO / "baselines" / "NVIDIA-H200").glob("*.json"))
    history = REPO / "baselines" / "history" / "NVIDIA-H200.jsonl"
    golden = REPO / "tests" / "render" / "golden" / "results.json"
    files = [*shipped, history, golden]
    before = _digest(files)
    today = set()
    for path in shipped:
        loaded = read_baseline_file(path, "NVIDIA-H200", path.stem)
        assert json.loads(path.read_text(encoding="utf-8"))["schema_version"] < 3
        for key, entry in loaded.entries.items():
            assert baseline_key(entry.result) == key
            assert not set(MOVED_FROM_SCOPE) & set(entry.result.scope)
            today.add(key)
    lines = read_nights(history)
    assert lines
    assert {night.key for night in lines} <= today, "every history line's key is a key of today's"
    run = load_run(golden)
    assert [baseline_key(c) for c in run.comparisons] == [
        f"benchmarks/test_claim_d.py::test_mlx_draft[{category}] [{category}, γ=3, "
        "mlx-community/Qwen2.5-7B-Instruct-4bit + mlx-community/Qwen2.5-0.5B-Instruct-4bit @abc123]"
        for category in ("prose", "code")
    ]
    assert _digest(files) == before, "reading never rewrites a stored file"


def test_a_newly_written_files_scope_holds_no_condition(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n\n"
        "@pytest.mark.speedup(min=0.5, of='end-to-end')\n"
        "def test_all(specdec):\n    specdec.compare('code', temperature=0.7, context=256)\n"
    )
    result = pytester.runpytest(*SIM, "--specdec-json=run.json", "--specdec-max-trials=4", "--specdec-min-trials=4",
                                "--specdec-backend-option", "draws=same")  # fmt: skip
    result.assert_outcomes(passed=1)
    (comparison,) = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    assert not set(MOVED_FROM_SCOPE) & set(comparison["scope"])
    assert comparison["conditions"] == {
        "context": 256,
        "metric": "end-to-end",
        "num_draft": 3,
        "sampling": {"temperature": 0.7, "top_p": 1.0},
    }
    history = next((pytester.path / "baselines" / "history").glob("*.jsonl")).read_text()
    assert json.loads(history.splitlines()[0])["conditions"] == comparison["conditions"]


@pytest.mark.parametrize(
    ("call", "said"),
    [
        ("specdec.compare('code', warmth=3)", "*compare(): compare() has no argument 'warmth' — its conditions are*"),
        ("specdec.sweep(num_draft=[1], context=[0])", "*sweep(): sweep() takes one axis and its values*"),
        ("specdec.sweep(num_draft=[])", "*sweep(): sweep(num_draft=[]) needs a non-empty list of values*"),
        ("specdec.sweep(top_p=[0.5])", "*sweep(): sweep() sweeps temperature=, not top_p=*"),
        ("specdec.sweep(context=[0, 1.5])", "*sweep(): context=1.5 is not a whole number*"),
        (
            "specdec.sweep(temperature=[0.7, 0.7])",
            "*sweep(): sweep(temperature=*) names 0.7 twice — each value is measured once*",
        ),
        ("specdec.sweep(context=[64, 64])", "*sweep(): sweep(context=*) names 64 twice — each value is measured once*"),
    ],
)
def test_a_bad_condition_or_sweep_is_one_line_before_anything_runs(
    pytester: pytest.Pytester, call: str, said: str
) -> None:
    pytester.makepyfile(f"def test_it(specdec):\n    {call}\n")
    result = pytester.runpytest(*SIM, "--specdec-json=run.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([said + " — no result was kept"])
    assert "Traceback" not in result.stdout.str()
    run = load_run(pytester.path / "run.json")  # nothing measured, and the results say why (for the gate)
    assert run.comparisons == ()
    assert [t.kind for t in run.unmeasured] == [Unmeasured.REFUSED]


def test_one_sweep_over_any_axis_with_the_same_summary_and_the_old_names_as_aliases(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        "def test_gamma(specdec):\n    specdec.sweep(num_draft=[1, 2], max_trials=4)\n\n"
        "def test_context(specdec):\n    specdec.sweep(context=[0, 512], max_trials=4)\n\n"
        "def test_alias(specdec):\n    specdec.context_sweep([0, 512], max_trials=4)\n"
    )
    result = pytester.runpytest(*SIM, "--specdec-min-trials=4", "--specdec-plot=run.png")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*::test_gamma γ sweep [[]code[]]: γ=1 decode *; γ=2 decode * — decode *; best γ=*; break-even α: γ=1 *",
            "*::test_context context sweep [[]code[]]: ctx=0 (* prompt tokens) decode *; ctx=512 (*",
            "*::test_alias context sweep [[]code[]]: ctx=0 (* prompt tokens) decode *; ctx=512 (*",
        ]
    )
    assert (pytester.path / "run-num_draft-test_gamma.png").is_file()
    assert (pytester.path / "run-context-test_context.png").is_file()
