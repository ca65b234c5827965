"""Sampled comparisons end to end on the simulated backend: which lossless check runs, and what it says."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pytest_specdec.axes import Conditions
from pytest_specdec.axes.sampling import SAMPLING
from pytest_specdec.backends import load_backend, profile_pairs
from pytest_specdec.backends.base import Arm
from pytest_specdec.backends.sampling import Sampling
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.measure.sampled import DISTRIBUTION, EXACT, SAME_SEED, check_method, lossless_failure, pair_seed
from pytest_specdec.store.records import ComparisonRecord

SIM = ("--backend=simulated", "-p", "no:cacheprovider")


def plan(temperature: float) -> ComparisonPlan:
    return ComparisonPlan(
        "code", prompts_for("code"), Arm("plain"), Arm("sd", speculative=True, num_draft=3), 16, 8, 8, 0.98,
        conditions=Conditions({"sampling": Sampling(temperature)}), order="5eed",
    )  # fmt: skip


def simulated(**options: str) -> object:
    return load_backend("simulated", profile_pairs("embedded")["simulated"], {"speedup": "1.5", **options})


def test_greedy_keeps_the_exact_check_and_runs_no_distribution_check() -> None:
    comparison = run_comparison(simulated(), plan(0.0))  # type: ignore[arg-type]
    assert comparison.output.method == EXACT
    assert comparison.output.identical
    assert comparison.output.distribution is None


def test_a_backend_that_draws_one_text_per_seed_is_checked_exactly() -> None:
    comparison = run_comparison(simulated(draws="same"), plan(0.7))  # type: ignore[arg-type]
    output = comparison.output
    assert output.method == SAME_SEED
    assert output.identical
    assert output.distribution is None
    assert all(p.baseline.token_ids == p.treatment.token_ids for p in comparison.pairs)
    assert len({p.baseline.token_ids for p in comparison.pairs}) > 1  # each pair drew with a seed of its own


def test_where_draws_differ_the_distribution_decides_and_a_hotter_sd_arm_fails_saying_how() -> None:
    lossless = run_comparison(simulated(), plan(0.7))  # type: ignore[arg-type]
    assert lossless.output.method == DISTRIBUTION
    assert lossless.output.identical
    assert lossless.output.distribution is not None
    assert lossless.output.distribution.generations == 128
    hotter = run_comparison(simulated(sd_temperature="1.0"), plan(0.7))  # type: ignore[arg-type]
    assert not hotter.output.identical
    line = lossless_failure(hotter.output, hotter.plan)
    assert line.startswith("SD changed the output distribution (T=0.7): the SD arm's draws were more spread out")
    assert "128 continuations of 16 tokens per arm and prompt" in line


def test_pairs_that_part_under_one_seed_hand_over_to_the_distribution_check() -> None:
    # draws=same with a hotter SD arm: the pairs part, the distribution check catches it
    comparison = run_comparison(simulated(draws="same", sd_temperature="1.0"), plan(0.7))  # type: ignore[arg-type]
    assert comparison.output.method == DISTRIBUTION
    assert not comparison.output.identical
    assert comparison.output.near_ties[0].startswith("with one seed the arms parted in ")


def test_a_backend_that_cannot_sample_is_refused_in_one_line() -> None:
    class GreedyOnly:
        name = "greedy-only"

    with pytest.raises(SpecdecUsageError, match="backend greedy-only decodes greedily only here"):
        check_method(GreedyOnly(), greedy=False)
    assert check_method(GreedyOnly(), greedy=True) == EXACT  # greedy needs nothing of a backend


def test_pair_seeds_are_never_zero_and_differ_by_pair() -> None:
    seeds = [pair_seed("ffffffff", i) for i in range(1000)] + [pair_seed("", 0)]
    assert 0 not in seeds
    assert len(set(seeds[:1000])) == 1000


def test_the_sampling_marker_samples_both_arms_and_labels_the_result(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.sampling(temperature=0.7)\n@pytest.mark.speedup(min=1.1)\n"
        "def test_claim(specdec):\n    r = specdec.compare('code')\n"
        "    assert r.record.conditions.labels == ('T=0.7',)\n    assert r.record.scope['lossless_check'] == 'distribution'\n"
    )
    result = pytester.runpytest(*SIM, "--specdec-backend-option", "speedup=1.5", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*lossless check at T=0.7 by distribution: 128 continuations*same distribution*"])
    smaller = pytester.runpytest(
        *SIM, "--specdec-backend-option", "speedup=1.5", "-rA", "--specdec-distribution-samples=24"
    )
    smaller.assert_outcomes(passed=1)
    smaller.stdout.fnmatch_lines(["*lossless check at T=0.7 by distribution: 24 continuations*"])
    # the check's own progress, about every twentieth generation in a log, with the time it has left
    smaller.stdout.fnmatch_lines(["*specdec code: distribution check 9/192, * s*"])
    assert "distribution check 5/192" not in smaller.stdout.str()


def test_compare_overrides_the_marker_and_a_hotter_arm_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.sampling(temperature=0.7, top_p=0.9)\n"
        "def test_claim(specdec):\n    specdec.compare('code', temperature=0.5)\n"
    )
    result = pytester.runpytest(*SIM, "--specdec-backend-option", "sd_temperature=1.0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*SD changed the output distribution (T=0.5, top_p=0.9)*"])


def test_compare_with_a_bad_temperature_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(specdec):\n    specdec.compare('code', temperature=-1)\n")
    result = pytester.runpytest(*SIM)
    result.stdout.fnmatch_lines(["*compare(): temperature=-1 is outside 0-5*"])


def test_a_claim_can_name_the_end_to_end_speedup(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.speedup(min=1.1, of='end-to-end')\n"
        "def test_claim(specdec):\n    r = specdec.compare('code')\n"
        "    assert r.record.conditions.labels == ('end-to-end',)\n"
    )
    result = pytester.runpytest(*SIM, "--specdec-backend-option", "speedup=1.5", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*decode speedup (first token to last) 1.*x*the verdict reads end to end*"])


def test_a_temperature_sweep_reports_speedup_and_acceptance_at_each_temperature(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "def test_sweep(specdec):\n"
        "    results = specdec.temperature_sweep([0.0, 0.7], 'code', max_trials=16)\n"
        "    assert [r.record.conditions.labels for r in results] == [(), ('T=0.7',)]\n"
    )
    result = pytester.runpytest(
        *SIM, "--specdec-backend-option", "speedup=1.5", "--specdec-backend-option", "draws=same"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*temperature sweep [[]code[]]: T=0 decode 1.*x [[]*[]], end to end *, acceptance 0.*; T=0.7 decode 1.*x*"
            " — decode pays off at every value decided (T=0, T=0.7)*"
        ]
    )
    result.stdout.fnmatch_lines(["simulated *code, T=0.7 *"])  # the verdict table tells the sweep's rows apart


def test_a_temperature_sweep_with_a_bad_temperature_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_sweep(specdec):\n    specdec.temperature_sweep([0.7, 7.0])\n")
    result = pytester.runpytest(*SIM)
    result.stdout.fnmatch_lines(["*temperature_sweep(): temperature=7 is outside 0-5*"])


def test_baseline_keys_keep_sampled_and_end_to_end_results_apart(make_record: Callable[..., ComparisonRecord]) -> None:
    from dataclasses import replace

    from pytest_specdec.store.baselines import baseline_key

    greedy = make_record("code", 1.5, "holds", None)
    sampled = replace(greedy, conditions=greedy.conditions.with_(sampling=Sampling(0.7)))
    timed = replace(greedy, conditions=greedy.conditions.with_(metric="end-to-end"))
    keys = {baseline_key(r) for r in (greedy, sampled, timed)}
    assert len(keys) == 3
    assert "[code, γ=3, " in baseline_key(greedy)  # greedy decode keys are the ones stored before
    assert "[code, γ=3, T=0.7, " in baseline_key(sampled)
    assert "[code, γ=3, end-to-end, " in baseline_key(timed)


def test_arms_on_backends_of_their_own_compare_distributions_and_a_greedy_only_arm_is_named() -> None:
    """Two configurations (here two simulated backends) draw alike for one seed by no rule: the distribution check."""
    from pytest_specdec.backends.arms import ArmRouter

    plain, sd = simulated(draws="same"), simulated(draws="same")
    router = ArmRouter({"plain": plain, "sd": sd})  # type: ignore[dict-item]
    assert check_method(router, greedy=False) == DISTRIBUTION

    class GreedyOnly:
        name = "ollama"
        pair = plain.pair  # type: ignore[attr-defined]

    with pytest.raises(SpecdecUsageError, match=r"^the sd arm's backend ollama decodes greedily only here"):
        check_method(ArmRouter({"plain": plain, "sd": GreedyOnly()}), greedy=False)  # type: ignore[dict-item]


def test_top_p_without_a_temperature_is_a_usage_line_and_a_sweep_takes_the_markers_top_p(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        "import pytest\n\n"
        "def test_cut_alone(specdec):\n    specdec.compare('code', top_p=0.9)\n\n"
        "@pytest.mark.sampling(temperature=0.7, top_p=0.9)\n"
        "def test_greedy_over_the_marker(specdec):\n    specdec.compare('code', temperature=0)\n\n"
        "@pytest.mark.sampling(temperature=0.7, top_p=0.9)\n"
        "def test_sweep(specdec):\n    specdec.temperature_sweep([0, 0.7], max_trials=4)\n"
    )
    result = pytester.runpytest(*SIM, "--specdec-json=run.json", "--specdec-distribution-samples=24")
    result.stdout.fnmatch_lines(["*compare(): top_p=0.9 cuts nothing at temperature 0*drop top_p*"])
    records = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    said = {(r["nodeid"].split("::")[-1], Conditions.load(r["conditions"]).get(SAMPLING).label()) for r in records}
    assert said == {("test_greedy_over_the_marker", "greedy"), ("test_sweep", "greedy"),
                    ("test_sweep", "T=0.7, top_p=0.9")}  # fmt: skip
