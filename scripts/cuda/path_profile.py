"""Where the plugin's plain arm loses time against a bare loop on the same Llama instance (issue #52).

Run: ``python scripts/cuda/path_profile.py THREADS ROUNDS`` (with llama-cpp-python importable).
Each round runs, in a cyclic Latin square, the plugin's plain arm as ``run_trial`` runs it (the
first token, then the rest in one burst) and as it ran before (a burst a token), and the bare
loop of ``studies/arm_agreement.py`` on the plugin's own plain ``Llama``: after ``reset()`` as
the plugin starts, without it (llama-cpp-python then reuses the prompt's prefix), and with each
piece of the old per-token path added (the bursts; one more generator). Every token's arrival
is stamped where the harness sees every token. Prints per harness the median tok/s, the first
gap after the prompt, the later gaps, and the collections (and their time) that fell inside
decode windows; then the plugin's tok/s over each other harness's, per round.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import sys
import time
from typing import Any

from pytest_specdec.backends import load_backend, profile_pairs
from pytest_specdec.backends.base import GenerationRequest, ModelPair, TokenBurst
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure.trial import timed_generation
from studies.arm_agreement import PLAIN, interleaved

threads, rounds = int(sys.argv[1]), int(sys.argv[2])
pair = profile_pairs("embedded")["llama-cpp"]
backend: Any = load_backend(
    "llama-cpp", ModelPair(pair.target, pair.draft),
    {"spec": "draft", "n_threads": str(threads), "n_threads_batch": str(threads)},
)  # fmt: skip
prompts = prompts_for("code", "continuation" if backend.is_base_model() else "instruction")
collections: list[tuple[float, float, int]] = []  # (start, end, generation)
started: list[float] = []


def on_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        started.append(time.perf_counter())
    else:
        collections.append((started.pop(), time.perf_counter(), info["generation"]))


gc.callbacks.append(on_gc)


def plugin(every_token: bool) -> Any:
    """The plugin's plain arm as ``run_trial`` runs it (``every_token=False``), or with a burst per token."""

    def run(text: str) -> list[float]:
        stamps: list[float] = []

        def clock() -> float:
            now = time.perf_counter()
            stamps.append(now)
            return now

        timed_generation(backend, GenerationRequest(text, PLAIN, 64, every_token=every_token), clock)
        return stamps[1:]  # the first stamp is the start, before the prompt

    return run


def bare_loop(reset: bool = True, burst: bool = False, layer: bool = False) -> Any:
    """The bare loop on the plugin's plain ``Llama``: ``reset`` first, as the plugin does (else llama-cpp-python
    reuses the prompt's prefix from the last generation); ``burst``: the adapter's per-token work (``int``, the
    list, a ``TokenBurst``); ``layer``: the stream read through one more generator, as the adapter wraps it."""

    def relay(stream: Any) -> Any:
        for token in stream:  # noqa: UP028 - a for loop, as the adapter's
            yield token

    def bare(text: str) -> list[float]:
        llm = backend._plain_llm
        tokens = list(backend.prompt_tokens(text))
        stamps: list[float] = []
        emitted: list[int] = []
        if reset:
            llm.reset()
        stream = llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
        try:
            for token in relay(stream) if layer else stream:
                if burst:
                    emitted.append(token := int(token))
                    TokenBurst((token,))
                stamps.append(time.perf_counter())
                if len(stamps) >= 64:
                    break
        finally:
            stream.close()
        return stamps

    return bare


harnesses = {
    "plugin": plugin(False), "plugin, a burst a token": plugin(True), "bare after reset()": bare_loop(),
    "bare, prefix reused": bare_loop(reset=False), "bare + bursts": bare_loop(burst=True),
    "bare + generator": bare_loop(layer=True),
}  # fmt: skip
names = list(harnesses)
results = interleaved(harnesses, [prompt.text for prompt in prompts], rounds)


def in_window(stamps: list[float]) -> tuple[int, float]:
    hits = [(b - a) for a, b, _ in collections if stamps[0] <= a <= stamps[-1]]
    return len(hits), sum(hits)


print(f"{threads} threads, {rounds} rounds, 64 tokens, embedded pair, plain arm on the plugin's own Llama")
print("| harness | median tok/s | first gap µs | later gaps ms | median gap µs | mean gap µs | p90 gap µs "
      "| GCs in window / gen | GC ms / gen |")  # fmt: skip
print("|---|---|---|---|---|---|---|---|---|")
for name, runs in results.items():
    rates = [63 / (s[-1] - s[0]) for s in runs]  # 64 tokens: 63 after the first
    hits = [in_window(s) for s in runs]
    gaps = [b - a for stamps in runs for a, b in itertools.pairwise(stamps)] if len(runs[0]) == 64 else []
    spread = (  # every token stamped: the first gap (after the prompt's batch), the later ones
        f"{statistics.median(s[1] - s[0] for s in runs) * 1e6:.1f} | {statistics.median(s[-1] - s[1] for s in runs) * 1e3:.3f} | "
        f"{statistics.median(gaps) * 1e6:.1f} | {statistics.fmean(gaps) * 1e6:.1f} | "
        f"{statistics.quantiles(gaps, n=10)[-1] * 1e6:.1f}"
        if gaps
        else "- | - | - | - | -"
    )
    print(
        f"| {name} | {statistics.median(rates):.1f} | {spread} | "
        f"{statistics.fmean(h[0] for h in hits):.2f} | {statistics.fmean(h[1] for h in hits) * 1e3:.3f} |"
    )
for name in names[1:]:
    ratios = [  # tok/s of the plugin ÷ tok/s of each other harness, per round
        (b[-1] - b[0]) / (p[-1] - p[0]) for p, b in zip(results["plugin"], results[name], strict=True)
    ]
    print(f"plugin ÷ {name}: median {statistics.median(ratios):.4f}, mean {statistics.fmean(ratios):.4f}")
