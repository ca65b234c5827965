"""What the plugin's own Python adds to each token of a llama-cpp plain arm, with the engine taken away.

Run: ``python benchmarks/per_token_cost.py`` (not collected by pytest; about a minute).

A fake ``Llama`` whose ``generate`` yields token ids at once stands in for the engine, so what is
timed is only Python: the llama-cpp adapter's ``generate`` under :func:`pytest_specdec.measure.trial.
timed_generation` (the plugin's plain arm, as :func:`pytest_specdec.measure.run_trial` runs it),
against the bare loop of ``benchmarks/arm_agreement.py`` (:func:`~pytest_specdec.benchmarks.arm_agreement.
timed`). Medians over ``--generations`` generations of ``--tokens`` tokens, each harness twice in
turn; the difference, divided into a token's time at a real rate (``--rate`` tok/s), is the share
of the plain arm's gap to a bare loop that the per-token path can explain.
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
from pytest_specdec.benchmarks.arm_agreement import timed
from pytest_specdec.measure.trial import timed_generation


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
    request = GenerationRequest("prompt", Arm("plain"), tokens)

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generations", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rate", type=float, default=1500.0, help="a real plain arm's tok/s, for the share")
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


if __name__ == "__main__":
    main()
