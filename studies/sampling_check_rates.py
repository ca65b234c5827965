"""The distribution check's two error rates: false alarms on a lossless SD arm, catches of a hotter one.

Run: ``python -m studies.sampling_check_rates --backend simulated --runs 400``
(``--backend llama-cpp`` / ``llama-server`` / ``mlx`` run the embedded pair, ``--profile gemma`` Gemma 3 270M
on llama-cpp). Not collected by pytest.

Each run draws the plugin's default sample (``ComparisonPlan.distribution_generations``
continuations of ``distribution_tokens`` tokens per arm on each of the 4 ``code``
prompts, seeds of its own) through :func:`~pytest_specdec.measure.sampled.check_distribution`,
the path ``compare(temperature=0.7)`` takes. *Lossless*: plain and SD both at T = 0.7 (on
the simulated backend the SD arm draws from other seeds, as mlx-lm's does). *Hotter*: the
SD arm samples at T = 0.8 where plain samples at 0.7 (the simulated backend's
``sd_temperature``; on a real backend a wrapper here raises the SD arm's temperature). The
issue's targets: false alarms ≤ 1 % over ≥ 200 runs, catches ≥ 90 %. Wilson 95 % intervals.

A real backend needs minutes a check on a small CPU, so ``--record FILE`` keeps one JSON
line per finished run and a later call with the same file and settings goes on from
there (``--runs`` is the total per arm); lines of other settings (backend, profile, model
digest, sample size, α) are left alone and not counted. Calls sharing one file count each
other's lines before every check and stop at the total together. On this 2-core CPU two
llama-cpp calls at once, with tests running besides, finished no check in 20 minutes where
one alone finishes one a minute: run one.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from scipy.stats import binomtest

from pytest_specdec.backends import load_backend, profile_pairs
from pytest_specdec.backends.base import Arm, Backend, GenerationRequest, GenerationStream, ModelPair
from pytest_specdec.backends.sampling import Sampling
from pytest_specdec.embedded.packaged import GEMMA_GGUF
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan
from pytest_specdec.measure.sampled import check_distribution
from pytest_specdec.output_distribution import DEFAULT_ALPHA

PLAIN_T, HOT_T = 0.7, 0.8


class HotterSD:
    """A real backend whose SD arm samples at ``HOT_T``: the lossy arm the check must catch."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name

    def generate(self, request: GenerationRequest) -> GenerationStream:
        if request.arm.speculative:
            request = replace(request, sampling=replace(request.sampling, temperature=HOT_T))
        return self.inner.generate(request)

    def sampled_draws_per_seed(self) -> str:
        return "distribution"


def _backends(name: str, profile: str, extra: Mapping[str, str]) -> tuple[Backend, Backend]:
    """The lossless backend and its hotter twin (``extra``: the user's backend options)."""
    if name == "simulated":
        options: Mapping[str, str] = {"draws": "distribution", **extra}
        pair = profile_pairs("embedded")["simulated"]
        return load_backend(name, pair, options), load_backend(name, pair, {**options, "sd_temperature": str(HOT_T)})
    pair = profile_pairs(profile)[name]
    if profile == "gemma":
        pair = ModelPair(GEMMA_GGUF, None)
    options = {"spec": "prompt-lookup"} if name == "llama-cpp" and pair.draft is None else {}
    backend = load_backend(name, pair, {**options, **extra})
    return backend, HotterSD(backend)  # type: ignore[return-value]


def recorded(path: Path | None, settings: Mapping[str, object]) -> dict[str, int]:
    """Refusals and runs so far per arm label, from the lines of ``path`` made with ``settings``."""
    counts: dict[str, int] = {}
    if path is None or not path.is_file():
        return counts
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            run = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a killed run
        if isinstance(run, dict) and run.get("settings") == settings:
            label = str(run.get("arm"))
            counts[label] = counts.get(label, 0) + 1
            counts[label + ":refused"] = counts.get(label + ":refused", 0) + bool(run.get("refused"))
    return counts


def tally(done: Mapping[str, int], labels: tuple[str, ...]) -> tuple[dict[str, int], dict[str, int]]:
    """Runs and refusals per arm label, from :func:`recorded`'s counts."""
    return {label: done.get(label, 0) for label in labels}, {label: done.get(label + ":refused", 0) for label in labels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="simulated", choices=("simulated", "llama-cpp", "llama-server", "mlx"))
    parser.add_argument("--profile", default="embedded", choices=("embedded", "gemma"))
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--generations", type=int, default=0, help="continuations per arm and prompt (0: default)")
    parser.add_argument(
        "--record", type=Path, default=None, help="a JSON-lines file to keep each run in and go on from"
    )
    parser.add_argument(
        "--backend-option", action="append", default=[], metavar="KEY=VALUE",
        help="a backend option, e.g. n_threads=2 on llama-cpp (it changes the speed, not the draws)",
    )  # fmt: skip
    args = parser.parse_args()
    extra = dict(item.partition("=")[::2] for item in args.backend_option)
    lossless, hotter = _backends(args.backend, args.profile, extra)
    style = "continuation" if args.profile == "gemma" else "instruction"
    plan = ComparisonPlan(
        "code", prompts_for("code", style), Arm("plain"), Arm("sd", speculative=True, num_draft=3), 16, 2, 2, 0.98
    )
    plan = plan.under(sampling=Sampling(PLAIN_T))
    if args.generations:
        plan = replace(plan, distribution_generations=args.generations)
    settings = {
        "backend": args.backend, "profile": args.profile, "model_digest": lossless.model_digest(),
        "generations": plan.distribution_generations, "tokens": plan.distribution_tokens, "alpha": DEFAULT_ALPHA,
    }  # fmt: skip
    arms = (("lossless (both T=0.7)", lossless), ("hotter (SD T=0.8)", hotter))
    labels = tuple(label for label, _ in arms)
    runs, refused = tally(recorded(args.record, settings), labels)
    started = time.monotonic()
    while any(runs[label] < args.runs for label, _ in arms):  # the arms alternate: a cut-short call keeps both
        for label, backend in arms:
            if args.record is not None:  # several calls may share one file (one per core): count them all
                runs, refused = tally(recorded(args.record, settings), labels)
            if runs[label] >= args.runs:
                continue
            check = check_distribution(backend, replace(plan, order=secrets.token_hex(6)))
            runs[label] += 1
            refused[label] += not check.same
            if args.record is not None:
                line = {"settings": settings, "arm": label, "refused": not check.same, "p": check.p_value}
                with args.record.open("a", encoding="utf-8") as record:
                    record.write(json.dumps(line) + "\n")
            if runs[label] % 20 == 0 or args.record is not None:
                elapsed = time.monotonic() - started
                print(
                    f"  {label}: run {runs[label]}/{args.runs}, refused {refused[label]} ({elapsed:.0f} s)", flush=True
                )
    if args.record is not None:
        runs, refused = tally(recorded(args.record, settings), labels)
    rows = []
    for label, _ in arms:
        low, high = binomtest(refused[label], runs[label]).proportion_ci(method="wilson")
        share = refused[label] / runs[label]
        rows.append(f"| {label} | {refused[label]}/{runs[label]} = {share:.1%} [{low:.1%}, {high:.1%}] |")
    print(
        f"{args.backend} {args.profile}, {min(runs.values())}+ runs, {plan.distribution_generations} continuations of "
        f"{plan.distribution_tokens} tokens per arm and prompt, {len(plan.prompts)} prompts, alpha {DEFAULT_ALPHA:g}"
    )
    print("| SD arm | refused by the distribution check |")
    print("|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
