"""Fair arms: the plugin's plain and SD arms against bare loops of the library (README: "Fair arms").

Run: ``python -m studies.arm_agreement --backend llama-cpp --profile embedded --threads 4
[--spec draft|prompt-lookup] [--rounds 24] [--max-rounds 240] [--label "quiet 16-core"] [--raw rounds.json]``
(``--summarize rounds.json`` prints a saved run's table again; backends ``mlx`` and
``llama-cpp``; profiles ``embedded``, ``embedded-1b`` and ``gemma``). Not collected by pytest.

Each round runs, on the same prompt and token budget, its harnesses interleaved: the
plugin's plain and SD arms, a bare plain and SD loop, and a second pair of bare loops on
instances of their own (the **control**: what a second instance alone moves, so an
instance effect is not read as the plugin's); for llama-cpp also the bare loops on the
plugin's own instances (the **cross** loops, which split plugin ÷ bare into the plugin's
path on the same instances, ``path:``, and where its instances lie, ``instances:``). The
order is a cyclic Latin square of them, reversed every other cycle, so every harness
takes every position equally often
(with a plain alternation the plugin's plain arm always ran first or last, which on this
CPU alone moved the speedup ratio by about 2 %). Rounds go on, past ``--rounds``, until
every median's 95 % interval is narrower than ``--width`` (2 %), checked after whole
squares, or ``--max-rounds``; the title says which. The bare loops are the library used
as its documentation shows, with the plugin's load options (``--threads``: both thread
counts, as the plugin sets them):

* llama-cpp: ``Llama(model_path, n_gpu_layers=-1, n_threads=N, n_threads_batch=N)`` and
  ``generate()`` for plain; for SD a greedy second-model drafter written as a user writes
  one (``bare_draft_model``: a ``LlamaDraftModel`` on a second ``Llama`` keeping its own KV
  cache in step, prefilled with the prompt before the first token, as the plugin's SD arm
  does), or with ``--spec prompt-lookup`` the library's own ``LlamaPromptLookupDecoding``;
* mlx: ``mlx_lm.stream_generate`` without and with ``draft_model=``, on the plugin's
  loaded weights (the control: a second copy loaded from the same folders).

Every rate is decode tok/s from the first token to the last, (n-1) tokens over that
time. Per round: plugin ÷ bare for plain tok/s, SD tok/s and the speedup, and control ÷
bare; reported as the median with its distribution-free 95 % interval (binomial order
statistics), and the geometric mean with a 95 % t interval. Targets (issue #52): plain
tok/s ≥ 0.995 × bare with the lower limit above 0.99; the speedup within 1 % of bare
with the lower limit above −2 %. For mlx also P2: the plugin's plain tok/s against
mlx-lm's own ``generation_tps`` on the same definition (``generation_tps`` counts n
tokens over n-1 intervals, so it is scaled by (n-1)/n).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from scipy import stats

from pytest_specdec.backends import profile_pairs
from pytest_specdec.backends.base import Arm, Backend, ModelPair
from pytest_specdec.embedded.packaged import GEMMA_GGUF
from pytest_specdec.embedded.prompts import Prompt, prompts_for
from pytest_specdec.hardware import usable_cores
from pytest_specdec.measure import ComparisonPlan, run_trial

PLAIN, SD = Arm("plain"), Arm("sd", speculative=True, num_draft=3)
R = TypeVar("R")  # what a harness returns (tok/s, or every token's arrival)
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


def bare_draft_model(draft: Any, num_draft: int) -> Any:
    """A greedy second-model drafter for ``Llama(draft_model=...)``, lean as a careful user writes it: its own KV
    cache kept in step with the context (the scan starts where the last call's context ended, only the new tokens
    are evaluated), ``num_draft`` greedy tokens read straight from the logits. The plugin's drafter drafts the same
    way, so the ratio measures the harness (counting, bookkeeping, the stream), not two drafting algorithms."""
    import ctypes

    import numpy as np
    from llama_cpp.llama_speculative import LlamaDraftModel

    row_type = ctypes.c_float * draft.n_vocab()

    class BareDraft(LlamaDraftModel):  # type: ignore[misc]
        def __init__(self) -> None:
            self.context: list[int] = []
            self.stable = 0

        def sync(self, ids: Any) -> None:
            limit = min(len(self.context), len(ids))
            common = min(self.stable, limit)
            while common < limit and self.context[common] == ids[common]:
                common += 1
            common = min(common, len(ids) - 1)
            draft.n_tokens = common
            new = ids[common:].tolist()
            draft.eval(new)
            del self.context[common:]
            self.context.extend(new)
            self.stable = len(ids)

        def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
            self.sync(input_ids)
            proposed = np.empty(num_draft, dtype=np.intc)
            for step in range(num_draft):
                address = ctypes.cast(draft._ctx.get_logits_ith(-1), ctypes.c_void_p).value
                proposed[step] = token = int(np.argmax(np.frombuffer(row_type.from_address(address), np.float32)))
                if step + 1 < num_draft:
                    draft.eval([token])
                    self.context.append(token)
            return proposed

    return BareDraft()


def load_llama_instances(pair: ModelPair, threads: int) -> tuple[Any, Any, Any]:
    """The bare loops' own plain and SD targets and draft, with the plugin's load options."""
    from llama_cpp import Llama

    from pytest_specdec.backends.files import resolve_gguf

    load = {"verbose": False, "n_ctx": 1024, "n_gpu_layers": -1, "n_threads": threads, "n_threads_batch": threads}
    path = str(resolve_gguf(pair.target))
    plain = Llama(model_path=path, **load)
    draft = Llama(model_path=str(resolve_gguf(pair.draft)), **load) if pair.draft else None
    return plain, Llama(model_path=path, **load, logits_all=True), draft


def llama_cpp_loops(
    tokens_of: Callable[[str], list[int]], instances: tuple[Any, Any, Any], max_tokens: int, instance: str
) -> dict[str, Callable[[Prompt], float]]:
    """Bare plain and SD loops on the given (plain, SD target, draft) instances: prompt lookup (the library's own
    speculative API) when there is no draft, else a bare second-model drafter prefilled with the prompt."""
    import numpy as np
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    plain, sd, draft_llm = instances
    drafter = (
        bare_draft_model(draft_llm, SD.num_draft)
        if draft_llm is not None
        else LlamaPromptLookupDecoding(max_ngram_size=NGRAM, num_pred_tokens=SD.num_draft)
    )
    print(f"  {instance} loops: {'second-model draft' if draft_llm is not None else 'prompt lookup'}", flush=True)

    def loop(llm: Any, speculative: bool) -> Callable[[Prompt], float]:
        def run(prompt: Prompt) -> float:
            tokens = tokens_of(prompt.text)  # the very tokens the plugin feeds
            llm.draft_model = drafter if speculative else None  # read by generate(); the plugin sets its own
            if speculative and draft_llm is not None:
                draft_llm.reset()
                drafter.context, drafter.stable = [], 0
                drafter.sync(np.asarray(tokens, dtype=np.intc))  # the draft's prefill, before decode
            stream = llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
            try:
                return timed(stream, max_tokens)[0]
            finally:
                stream.close()

        return run

    return {"plain": loop(plain, False), "sd": loop(sd, True)}


def mlx_loops(
    backend: Any, max_tokens: int, generation_tps: list[float], own_weights: bool = False
) -> dict[str, Callable[[Prompt], float]]:
    """Bare ``stream_generate`` loops on the plugin's loaded weights, or (``own_weights``: the control) on a second
    copy of the same weights loaded from the same folders."""
    from mlx_lm import load, stream_generate
    from mlx_lm.sample_utils import make_sampler

    model, tokenizer = backend._target.model, backend._target.tokenizer
    draft = backend._draft.model if backend._draft is not None else None
    if own_weights:
        model, tokenizer = load(str(backend._target.path))
        draft = load(str(backend._draft.path))[0] if backend._draft is not None else None
    greedy = make_sampler(temp=0.0)

    def run(prompt: Prompt, **extra: Any) -> float:
        stream = stream_generate(model, tokenizer, prompt.text, max_tokens=max_tokens, sampler=greedy, **extra)
        rate, last = timed(stream, max_tokens)
        if not extra:
            n = last.generation_tokens
            generation_tps.append(last.generation_tps * (n - 1) / n)
        return rate

    return {"plain": run, "sd": lambda p: run(p, draft_model=draft, num_draft_tokens=SD.num_draft)}


def latin_order(index: int, names: Sequence[str]) -> list[str]:
    """Round ``index``'s order of the harnesses: a cyclic Latin square, reversed every other cycle, so each harness
    takes every position equally often (the first run after a round's bookkeeping, or after another instance,
    costs something, and must not always fall on the same harness).

    >>> [latin_order(i, "abc") for i in range(4)]
    [['a', 'b', 'c'], ['b', 'c', 'a'], ['c', 'a', 'b'], ['c', 'b', 'a']]
    """
    shift = index % len(names)
    order = [*names[shift:], *names[:shift]]
    return order if (index // len(names)) % 2 == 0 else order[::-1]


def interleaved(harnesses: Mapping[str, Callable[[str], R]], texts: Sequence[str], rounds: int) -> dict[str, list[R]]:
    """Every harness once on every text (the warm-up), then ``rounds`` rounds in :func:`latin_order`, round ``i``
    on text ``i`` modulo their number: each harness's results in round order."""
    for text in texts:
        for run in harnesses.values():
            run(text)
    names = list(harnesses)
    results: dict[str, list[R]] = {name: [] for name in names}
    for index in range(rounds):
        for name in latin_order(index, names):
            results[name].append(harnesses[name](texts[index % len(texts)]))
    return results


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
    parser.add_argument("--rounds", type=int, default=24, help="rounds before the first look at the intervals")
    parser.add_argument("--max-rounds", type=int, default=240, help="give up narrowing the intervals here")
    parser.add_argument("--width", type=float, default=0.02, help="stop when every interval is narrower than this")
    parser.add_argument("--threads", type=int, default=0, help="llama-cpp: n_threads and n_threads_batch (0: cores)")
    parser.add_argument("--label", default="", help="where it ran (printed with the table)")
    parser.add_argument(
        "--spec", choices=("draft", "prompt-lookup"), default="draft",
        help="llama-cpp: the SD arm drafts with the profile's draft GGUF (default) or by prompt lookup",
    )  # fmt: skip
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--summarize", default="", help="print the table of a --raw file and stop")
    parser.add_argument("--raw", default="", help="write every round's tok/s (and its order) to this JSON file")
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
    parser.add_argument(
        "--bare-first", action="store_true",
        help="llama-cpp: load the bare and control instances before the plugin's (does the load order move a ratio?)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.summarize:  # no measurement: the round counts do not matter
        return args
    if args.max_rounds < 1:
        parser.error(f"--max-rounds {args.max_rounds} measures nothing: give 1 or more")
    if args.rounds > args.max_rounds:  # else the run stops at --max-rounds, short of what was asked
        parser.error(f"--rounds {args.rounds} is more than --max-rounds {args.max_rounds}: raise --max-rounds")
    return args


Loops = dict[str, Callable[[Prompt], float]]
HARNESSES = ("plugin plain", "bare plain", "control plain", "cross plain", "plugin sd", "bare sd", "control sd",
             "cross sd")  # fmt: skip


def _harnesses(args: argparse.Namespace) -> tuple[Backend, ModelPair, dict[str, Loops], list[float]]:
    """The plugin's backend and the loops the arguments ask for: ``bare``, ``control`` (a second bare instance)
    and, for llama-cpp, ``cross`` (the bare loops on the plugin's own instances)."""
    from pytest_specdec.backends import load_backend

    pair = profile_pairs(args.profile)[args.backend]
    target = (args.model or GEMMA_GGUF) if args.profile == "gemma" else pair.target
    if args.backend == "mlx":
        pair = ModelPair(target, args.draft or profile_pairs(args.profile)["mlx"].draft)
        options: dict[str, str] = {}
    else:
        drafting = args.spec == "draft" and pair.draft is not None
        pair = ModelPair(target, pair.draft if drafting else None)
        options = {"spec": "draft" if drafting else "prompt-lookup", "ngram": str(NGRAM),
                   "plain_instance": args.plain_instance}  # fmt: skip
        if args.threads:
            options |= {"n_threads": str(args.threads), "n_threads_batch": str(args.threads)}
    loaded: list[Backend] = []

    def tokens_of(text: str) -> list[int]:  # the plugin backend's tokens, whichever was loaded first
        return list(loaded[0].prompt_tokens(text))  # type: ignore[attr-defined]

    threads = args.threads or usable_cores().count
    own: dict[str, tuple[Any, Any, Any]] = {}
    if args.backend == "llama-cpp" and args.bare_first:
        own = {name: load_llama_instances(pair, threads) for name in ("bare", "control")}
    backend: Backend = load_backend(args.backend, pair, options)
    loaded.append(backend)
    generation_tps: list[float] = []  # mlx-lm's own figure for each bare plain run
    if args.backend == "mlx":
        loops = {"bare": mlx_loops(backend, args.max_tokens, generation_tps),
                 "control": mlx_loops(backend, args.max_tokens, [], own_weights=True)}  # fmt: skip
        return backend, pair, loops, generation_tps
    own = own or {name: load_llama_instances(pair, threads) for name in ("bare", "control")}
    own["cross"] = (backend._plain_llm, backend._llm, backend._draft_llm)  # type: ignore[attr-defined]
    print(f"  llama-cpp loops at {threads} threads", flush=True)
    return backend, pair, {name: llama_cpp_loops(tokens_of, instances, args.max_tokens, name)
                           for name, instances in own.items()}, generation_tps  # fmt: skip


def main() -> None:
    args = _arguments()
    if args.summarize:  # the table again from a --raw file (no measurement)
        saved = json.loads(Path(args.summarize).read_text())
        print_table(f"{args.summarize}: {len(saved)} rounds", ratio_rows(saved))
        return
    backend, pair, loops, generation_tps = _harnesses(args)
    plugin_style = "continuation" if getattr(backend, "is_base_model", lambda: False)() else "instruction"
    prompts = prompts_for(args.category, plugin_style)
    plan = ComparisonPlan(args.category, prompts, PLAIN, SD, args.max_tokens, 2, 2, 0.95)
    harness: dict[str, Callable[[Prompt], float]] = {
        "plugin plain": lambda p: run_trial(backend, p, PLAIN, plan, time.perf_counter).decode_tps,
        "plugin sd": lambda p: run_trial(backend, p, SD, plan, time.perf_counter).decode_tps,
        **{f"{name} {arm}": run for name, arms in loops.items() for arm, run in arms.items()},
    }
    names = tuple(name for name in HARNESSES if name in harness)
    for prompt in prompts:  # warm-up of every harness on every prompt (the plugin warms each arm on each)
        for run in harness.values():
            run(prompt)
    raw: list[dict[str, Any]] = []
    started = time.monotonic()
    period = 2 * len(names)  # a Latin square and its reverse
    done = ""
    for index in range(args.max_rounds):
        prompt = prompts[index % len(prompts)]
        sequence = latin_order(index, names)
        tps = {name: harness[name](prompt) for name in sequence}
        round_: dict[str, Any] = {"prompt": prompt.id, "order": list(sequence), "tps": tps}
        if generation_tps:
            round_["generation_tps"] = generation_tps[-1]
        raw.append(round_)
        rounds = index + 1
        widths = {name: (high - low) for name, (_, low, high) in intervals(ratio_rows(raw)).items()}
        print(f"  round {rounds} ({time.monotonic() - started:.0f} s): widest interval "
              f"{max(widths.values(), default=math.inf):.3f}", flush=True)  # fmt: skip
        if rounds >= args.rounds and rounds % period == 0 and max(widths.values(), default=math.inf) < args.width:
            done = f"every interval narrower than {args.width:.0%} after {rounds} rounds"
            break
    else:
        done = f"could not narrow every interval below {args.width:.0%} in {args.max_rounds} rounds"
    backend.close()
    if args.raw:
        Path(args.raw).write_text(json.dumps(raw, indent=1))
    drafter = "prompt lookup" if args.backend == "llama-cpp" and pair.draft is None else "second-model draft"
    title = (f"{args.backend} {args.profile} [{args.category}], {drafter}, {len(raw)} rounds, {args.max_tokens} "
             f"tokens, γ={SD.num_draft}, threads {args.threads or 'all usable'}"
             f"{', ' + args.label if args.label else ''}: {done}")  # fmt: skip
    print_table(title, ratio_rows(raw))


def ratio_rows(raw: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per round plugin ÷ bare (plain tok/s, SD tok/s, the speedup, mlx's P2), control ÷ bare (two bare
    instances: what a second instance alone moves) and, split by the cross loops, plugin ÷ cross (the plugin's
    path on the same instances) and cross ÷ bare (the plugin's instances under the bare path)."""
    rows: dict[str, list[float]] = {name: [] for name in (
        "plain tok/s", "SD tok/s", "speedup", "P2", "control: plain tok/s", "control: speedup",
        "path: plain tok/s", "path: SD tok/s", "instances: plain tok/s", "instances: SD tok/s")}  # fmt: skip
    for round_ in raw:
        tps = round_["tps"]
        rows["plain tok/s"].append(tps["plugin plain"] / tps["bare plain"])
        rows["SD tok/s"].append(tps["plugin sd"] / tps["bare sd"])
        rows["speedup"].append((tps["plugin sd"] / tps["plugin plain"]) / (tps["bare sd"] / tps["bare plain"]))
        if "control plain" in tps:
            rows["control: plain tok/s"].append(tps["control plain"] / tps["bare plain"])
            rows["control: speedup"].append(
                (tps["control sd"] / tps["control plain"]) / (tps["bare sd"] / tps["bare plain"])
            )
        if "cross plain" in tps:
            for arm, row in (("plain", "plain tok/s"), ("sd", "SD tok/s")):
                rows[f"path: {row}"].append(tps[f"plugin {arm}"] / tps[f"cross {arm}"])
                rows[f"instances: {row}"].append(tps[f"cross {arm}"] / tps[f"bare {arm}"])
        if "generation_tps" in round_:
            rows["P2"].append(tps["plugin plain"] / round_["generation_tps"])
    return rows


def intervals(rows: dict[str, list[float]]) -> dict[str, tuple[float, float, float]]:
    """Each row's median and distribution-free 95 % interval (rows with fewer than 6 rounds left out)."""
    return {name: median_interval(ratios) for name, ratios in rows.items() if len(ratios) >= 6}


def target(name: str, median: float, low: float) -> str:
    """Issue #52's targets: plain tok/s ≥ 0.995 × bare with its lower limit above 0.99; the speedup within 1 % of
    bare with its lower limit above −2 %; the rest are shown, not targeted."""
    if name == "plain tok/s":
        return "yes" if median >= 0.995 and low > 0.99 else "no"
    if name == "speedup":
        return "yes" if abs(median - 1) <= 0.01 and low > 0.98 else "no"
    return "-"


def print_table(title: str, rows: dict[str, list[float]]) -> None:
    print(title)
    print("| ratio | median [95 % interval] | geometric mean [95 % t] | target met |")
    print("|---|---|---|---|")
    for name, (median, low, high) in intervals(rows).items():
        mean, mean_low, mean_high = geometric_mean_interval(rows[name])
        print(
            f"| {name} | {median:.3f} [{low:.3f}, {high:.3f}] | {mean:.3f} [{mean_low:.3f}, {mean_high:.3f}] "
            f"| {target(name, median, low)} |"
        )


if __name__ == "__main__":
    main()
