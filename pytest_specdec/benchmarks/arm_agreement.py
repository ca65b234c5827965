"""Fair arms: the plugin's plain and SD arms against bare loops of the library (README: "Fair arms").

Run: ``python benchmarks/arm_agreement.py --backend llama-cpp --profile gemma [--rounds 12] [--raw rounds.json]``
(``--summarize rounds.json`` prints a saved run's table again)
(backends ``mlx`` and ``llama-cpp``; profiles ``embedded``, ``embedded-1b`` and ``gemma``). Not collected
by pytest.

Each round runs, on the same prompt and token budget, the plugin's plain arm, a bare
plain loop, the plugin's SD arm and a bare SD loop, interleaved (a cyclic Latin square
of the four, reversed every other cycle, so every harness takes every position equally
often: with a plain alternation the plugin's plain arm always ran first or last, which
on this CPU alone moved the speedup ratio by about 2 %). The bare loops are the library used as its documentation shows:

* llama-cpp: ``Llama(model_path, n_gpu_layers=-1)`` with its defaults otherwise and
  ``generate()`` for plain (full offload, as a CUDA or Metal user loads it and as the
  plugin does; without it the library's default of 0 layers keeps a GPU build's bare
  loop on the CPU, which made the first H200 run of this script compare CPU with GPU);
  ``Llama(..., draft_model=LlamaPromptLookupDecoding(...))`` for SD (the library's own
  speculative API; a second-model drafter has none, so SD here is prompt lookup);
* mlx: ``mlx_lm.stream_generate`` without and with ``draft_model=`` on the same loaded
  weights (so only the harness differs).

Every rate is decode tok/s from the first token to the last, (n-1) tokens over that
time. Per round: plugin ÷ bare for plain tok/s, SD tok/s and the speedup; reported as
the median with its distribution-free 95 % interval (binomial order statistics), and the
geometric mean with a 95 % t interval. Targets: median within 2 %, the median's interval
inside ±3 %. For mlx also P2: the plugin's plain tok/s against mlx-lm's own
``generation_tps`` on the same definition (``generation_tps`` counts n tokens over n-1
intervals, so it is scaled by (n-1)/n).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from scipy import stats

from pytest_specdec.backends import profile_pairs
from pytest_specdec.backends.base import Arm, Backend, ModelPair
from pytest_specdec.embedded.packaged import GEMMA_GGUF
from pytest_specdec.embedded.prompts import Prompt, prompts_for
from pytest_specdec.measure import ComparisonPlan, run_trial

PLAIN, SD = Arm("plain"), Arm("sd", speculative=True, num_draft=3)
NGRAM = 2


def timed(tokens: Iterator[Any], max_tokens: int) -> tuple[float, Any]:
    """Decode tok/s of a token stream, first token to last; and the last item."""
    first = last = 0.0
    count = 0
    final = None
    for item in tokens:
        last = time.perf_counter()
        first = first or last
        count += 1
        final = item
        if count >= max_tokens:
            break
    return (count - 1) / (last - first), final


def llama_cpp_loops(backend: Any, reference: str, max_tokens: int) -> dict[str, Callable[[Prompt], float]]:
    """Bare plain and prompt-lookup loops on the same GGUF, offloaded as the plugin offloads."""
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    from pytest_specdec.backends.files import resolve_gguf

    path = str(resolve_gguf(reference))
    plain = Llama(model_path=path, verbose=False, n_ctx=1024, n_gpu_layers=-1)
    lookup = LlamaPromptLookupDecoding(max_ngram_size=NGRAM, num_pred_tokens=SD.num_draft)
    sd = Llama(model_path=path, verbose=False, n_ctx=1024, n_gpu_layers=-1, draft_model=lookup, logits_all=True)

    def loop(llm: Any) -> Callable[[Prompt], float]:
        def run(prompt: Prompt) -> float:
            tokens = backend.prompt_tokens(prompt.text)  # the very tokens the plugin feeds
            stream = llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
            try:
                return timed(stream, max_tokens)[0]
            finally:
                stream.close()

        return run

    return {"plain": loop(plain), "sd": loop(sd)}


def mlx_loops(backend: Any, max_tokens: int, generation_tps: list[float]) -> dict[str, Callable[[Prompt], float]]:
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    model, tokenizer = backend._target.model, backend._target.tokenizer
    draft = backend._draft.model if backend._draft is not None else None
    greedy = make_sampler(temp=0.0)

    def run(prompt: Prompt, **extra: Any) -> float:
        stream = stream_generate(model, tokenizer, prompt.text, max_tokens=max_tokens, sampler=greedy, **extra)
        rate, last = timed(stream, max_tokens)
        if not extra:
            n = last.generation_tokens
            generation_tps.append(last.generation_tps * (n - 1) / n)
        return rate

    return {"plain": run, "sd": lambda p: run(p, draft_model=draft, num_draft_tokens=SD.num_draft)}


def median_interval(ratios: list[float]) -> tuple[float, float, float]:
    """Median ratio and its distribution-free 95 % interval (the binomial order statistics)."""
    ordered, n = sorted(ratios), len(ratios)
    low = max(int(stats.binom.ppf(0.025, n, 0.5)) - 1, 0)
    high = min(int(stats.binom.isf(0.025, n, 0.5)), n - 1)
    return statistics.median(ordered), ordered[low], ordered[high]


def geometric_mean_interval(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean ratio and a 95 % t interval of the mean log ratio."""
    logs = [math.log(r) for r in ratios]
    mean, sem = statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(len(logs))
    half = stats.t.ppf(0.975, len(logs) - 1) * sem
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("mlx", "llama-cpp"), default="llama-cpp")
    parser.add_argument("--profile", choices=("embedded", "embedded-1b", "gemma"), default="embedded")
    parser.add_argument("--category", default="copy")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--summarize", default="", help="print the table of a --raw file and stop")
    parser.add_argument("--raw", default="", help="write every round's four tok/s (and its order) to this JSON file")
    parser.add_argument("--model", default="", help="the Gemma GGUF's path (default: the PyPI package's copy)")
    parser.add_argument(
        "--draft", default="", help="mlx: the draft (default: the profile's; Gemma: PATH#early-exit=15)"
    )
    parser.add_argument(
        "--plain-instance",
        choices=("own", "shared"),
        default="own",
        help="llama-cpp: the plugin's plain arm on a Llama of its own (default) or on the SD arm's (the cost of "
        "one instance where two do not fit)",
    )
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    if args.summarize:  # the table again from a --raw file (no measurement)
        saved = json.loads(Path(args.summarize).read_text())
        print_table(f"{args.summarize}: {len(saved)} rounds", ratio_rows(saved))
        return
    from pytest_specdec.backends import load_backend

    pair = profile_pairs(args.profile)[args.backend]
    target = (args.model or GEMMA_GGUF) if args.profile == "gemma" else pair.target
    draft = None  # llama-cpp drafts by prompt lookup; mlx uses the profile's draft model
    if args.backend == "mlx":
        draft = args.draft or profile_pairs(args.profile)["mlx"].draft
    options = (
        {"spec": "prompt-lookup", "ngram": str(NGRAM), "plain_instance": args.plain_instance}
        if args.backend == "llama-cpp"
        else {}
    )
    backend: Backend = load_backend(args.backend, ModelPair(target, draft), options)
    generation_tps: list[float] = []  # mlx-lm's own figure for each bare plain run
    if args.backend == "llama-cpp":
        loops = llama_cpp_loops(backend, target, args.max_tokens)
    else:
        loops = mlx_loops(backend, args.max_tokens, generation_tps)
    plugin_style = "continuation" if getattr(backend, "is_base_model", lambda: False)() else "instruction"
    prompts = prompts_for(args.category, plugin_style)
    plan = ComparisonPlan(args.category, prompts, PLAIN, SD, args.max_tokens, 2, 2, 0.95)

    def plugin(arm: Arm, prompt: Prompt) -> float:
        return run_trial(backend, prompt, arm, plan, time.perf_counter).decode_tps

    for prompt in prompts:  # warm-up of every harness on every prompt (the plugin warms each arm on each)
        plugin(PLAIN, prompt), plugin(SD, prompt), loops["plain"](prompt), loops["sd"](prompt)
    raw: list[dict[str, Any]] = []
    started = time.monotonic()
    for index in range(args.rounds):
        prompt = prompts[index % len(prompts)]
        # Each harness takes every position in the round equally often (a cyclic Latin square,
        # reversed every other cycle): the first run after a round's bookkeeping, or after
        # another instance, costs something, and must not always fall on the same harness.
        base = [("plugin", PLAIN), ("bare", PLAIN), ("plugin", SD), ("bare", SD)]
        shift = index % len(base)
        order = base[shift:] + base[:shift]
        sequence = order if (index // len(base)) % 2 == 0 else order[::-1]
        tps = {}
        for who, arm in sequence:
            tps[f"{who} {arm.label}"] = plugin(arm, prompt) if who == "plugin" else loops[arm.label](prompt)
        round_: dict[str, Any] = {"prompt": prompt.id, "order": [f"{w} {a.label}" for w, a in sequence], "tps": tps}
        if generation_tps:
            round_["generation_tps"] = generation_tps[-1]
        raw.append(round_)
        print(f"  round {index + 1}/{args.rounds} ({time.monotonic() - started:.0f} s)", flush=True)
    backend.close()
    if args.raw:
        Path(args.raw).write_text(json.dumps(raw, indent=1))
    title = f"{args.backend} {args.profile} [{args.category}], {args.rounds} rounds, {args.max_tokens} tokens, γ={SD.num_draft}"
    print_table(title, ratio_rows(raw))


def ratio_rows(raw: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per round plugin ÷ bare: plain tok/s, SD tok/s, the speedup and (mlx) P2."""
    rows: dict[str, list[float]] = {"plain tok/s": [], "SD tok/s": [], "speedup": [], "P2": []}
    for round_ in raw:
        tps = round_["tps"]
        rows["plain tok/s"].append(tps["plugin plain"] / tps["bare plain"])
        rows["SD tok/s"].append(tps["plugin sd"] / tps["bare sd"])
        rows["speedup"].append((tps["plugin sd"] / tps["plugin plain"]) / (tps["bare sd"] / tps["bare plain"]))
        if "generation_tps" in round_:
            rows["P2"].append(tps["plugin plain"] / round_["generation_tps"])
    return rows


def print_table(title: str, rows: dict[str, list[float]]) -> None:
    print(title)
    print("| plugin ÷ bare | median [95 % interval] | geometric mean [95 % t] | target met |")
    print("|---|---|---|---|")
    for name, ratios in rows.items():
        if len(ratios) < 2:
            continue
        median, low, high = median_interval(ratios)
        mean, mean_low, mean_high = geometric_mean_interval(ratios)
        met = abs(median - 1) <= 0.02 and low >= 0.97 and high <= 1.03
        print(
            f"| {name} | {median:.3f} [{low:.3f}, {high:.3f}] | {mean:.3f} [{mean_low:.3f}, {mean_high:.3f}] "
            f"| {'yes' if met else 'no'} |"
        )


if __name__ == "__main__":
    main()
