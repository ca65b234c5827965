"""What the plugin's own Python adds to each token of a llama-cpp plain arm, with the engine taken away.

Run: ``python -m studies.per_token_cost`` (not collected by pytest; about a minute).

A fake ``Llama`` whose ``generate`` yields token ids at once stands in for the engine, so what is
timed is only Python: the llama-cpp adapter's ``generate`` under :func:`pytest_specdec.measure.trial.
timed_generation` (the plugin's plain arm, as :func:`pytest_specdec.measure.run_trial` runs it),
against the bare loop of ``studies/arm_agreement.py`` (:func:`~studies.arm_agreement.
timed`). Medians over ``--generations`` generations of ``--tokens`` tokens, each harness twice in
turn; the difference, divided into a token's time at a real rate (``--rate`` tok/s), is the share
of the plain arm's gap to a bare loop that the per-token path can explain.

The same for the SD arm's drafter: the plugin's second-model drafter (it records its proposals)
against the bare drafter of ``studies/arm_agreement.py``, on a fake draft ``Llama`` whose
``eval`` costs nothing and whose logits are one row of ``--vocabulary`` floats (the argmax both
do stays in); each call a context three tokens longer, as llama-cpp-python's speculative loop
calls ``draft_model(input_ids)`` after each verify step.
"""

from __future__ import annotations

import argparse
import statistics
import time
import types
from collections.abc import Callable, Generator
from typing import Any

from pytest_specdec.backends.base import Arm, GenerationRequest
from pytest_specdec.backends.llama_cpp.adapter import LlamaCppBackend
from pytest_specdec.backends.llama_cpp.drafters import make_second_model_drafter
from pytest_specdec.measure.trial import timed_generation
from studies.arm_agreement import bare_draft_model, timed


class InstantLlama:
    """The parts of ``llama_cpp.Llama`` the adapter's plain path touches; its tokens cost nothing."""

    input_ids = [0] * 1024
    draft_model = None

    def n_ctx(self) -> int:
        return len(self.input_ids)

    def reset(self) -> None:
        return None

    def generate(self, prompt: list[int], **_: Any) -> Generator[int, None, None]:
        yield from range(len(prompt), 1 << 20)


def harnesses(tokens: int) -> dict[str, Callable[[], float]]:
    """Seconds for one generation through the plugin's plain path and through the bare loop."""
    engine = types.SimpleNamespace(
        _llm=InstantLlama(), _plain_llm=InstantLlama(), prompt_tokens=lambda _: [1, 2, 3], _drafter=None
    )
    backend = types.SimpleNamespace(generate=lambda request: LlamaCppBackend.generate(engine, request))  # type: ignore[arg-type]
    request = GenerationRequest("prompt", Arm("plain"), tokens, every_token=False)  # as run_trial asks

    def plugin() -> float:
        start = time.perf_counter()
        timed_generation(backend, request, time.perf_counter)  # type: ignore[arg-type]
        return time.perf_counter() - start

    def bare() -> float:
        start = time.perf_counter()
        stream = InstantLlama().generate([1, 2, 3])
        timed(stream, tokens)
        stream.close()
        return time.perf_counter() - start

    return {"plugin plain": plugin, "bare loop": bare}


class FreeDraftLlama:
    """The parts of a draft ``llama_cpp.Llama`` the drafters touch: ``eval`` does nothing, the logits are fixed."""

    n_tokens = 0

    def __init__(self, vocabulary: int) -> None:
        import ctypes

        self.row = (ctypes.c_float * vocabulary)()
        self.row[vocabulary // 2] = 1.0
        row = ctypes.cast(self.row, ctypes.POINTER(ctypes.c_float))
        self._ctx = types.SimpleNamespace(get_logits_ith=lambda _: row)

    def n_vocab(self) -> int:
        return len(self.row)

    def n_ctx(self) -> int:
        return 1024

    def eval(self, tokens: list[int]) -> None:
        return None

    def reset(self) -> None:
        return None


def drafter_calls(vocabulary: int, calls: int = 20) -> dict[str, Callable[[], float]]:
    """Seconds a call for the plugin's recording second-model drafter and for the bare one, ``calls`` calls a run."""
    import numpy as np

    draft = FreeDraftLlama(vocabulary)
    makers: dict[str, Callable[[], Any]] = {
        "plugin drafter": lambda: make_second_model_drafter(draft, 3),  # it records its own proposals
        "bare drafter": lambda: bare_draft_model(draft, 3),
    }

    def run(make: Callable[[], Any]) -> Callable[[], float]:
        def once() -> float:
            drafter = make()
            prompt = np.arange(40, dtype=np.intc)
            (drafter.prefill if hasattr(drafter, "prefill") else drafter.sync)(prompt)
            contexts = [np.arange(40 + 3 * n, dtype=np.intc) for n in range(1, calls + 1)]
            start = time.perf_counter()
            for context in contexts:
                drafter(context)
            return (time.perf_counter() - start) / calls

        return once

    return {name: run(make) for name, make in makers.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generations", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rate", type=float, default=1500.0, help="a real plain arm's tok/s, for the share")
    parser.add_argument("--vocabulary", type=int, default=1024, help="the draft's logits row (the embedded pair's)")
    parser.add_argument("--calls", type=int, default=17, help="drafter calls a 64-token generation (γ=3, 96 %% kept)")
    parser.add_argument("--sd-rate", type=float, default=1530.0, help="a real SD arm's tok/s, for the share")
    args = parser.parse_args()
    runs = harnesses(args.tokens)
    found: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(2):
        for name, run in runs.items():
            found[name].append(statistics.median(run() for _ in range(args.generations)) / args.tokens)
    per_token = {name: min(values) for name, values in found.items()}
    for name, seconds in per_token.items():
        print(f"{name}: {seconds * 1e6:.2f} µs a token")
    extra = per_token["plugin plain"] - per_token["bare loop"]
    print(
        f"the plugin's path adds {extra * 1e6:.2f} µs a token: {extra * args.rate:.3%} of a token at {args.rate:g} tok/s"
    )
    calls = drafter_calls(args.vocabulary, args.calls)
    per_call: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(2):
        for name, run in calls.items():
            per_call[name].append(statistics.median(run() for _ in range(args.generations // 10)))
    for name, values in per_call.items():
        print(f"{name}: {min(values) * 1e6:.2f} µs a call")
    more = args.calls * (min(per_call["plugin drafter"]) - min(per_call["bare drafter"]))
    generation = args.tokens / args.sd_rate
    print(f"the plugin's drafter adds {more * 1e6:.1f} µs a generation ({args.calls} calls): {more / generation:.3%} of "
          f"a {args.tokens}-token SD generation at {args.sd_rate:g} tok/s")  # fmt: skip


if __name__ == "__main__":
    main()
