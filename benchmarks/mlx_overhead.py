"""The plugin's own overhead on mlx (README: P1, P2).

Run: ``python benchmarks/mlx_overhead.py [--rounds 10]``. Interleaves, on the same
model and prompt, (a) a bare mlx-lm ``stream_generate`` loop timed from first to
last token and (b) the plugin's plain arm (``measure.run_trial``), and reports the
ratio of their decode tok/s (P1) and the plugin's tok/s against mlx-lm's own
``generation_tps`` of the same runs (P2). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import statistics
import time

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.mlx import MlxBackend
from pytest_specdec.embedded import models
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan, run_trial


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    from mlx_lm import stream_generate

    prompt = prompts_for("code")[0]
    backend = MlxBackend(ModelPair(models.DEFAULT_TARGET), {"chat_template": "false"})
    # The same loaded weights for both, so only the harness differs.
    model, tokenizer = backend._target.model, backend._target.tokenizer
    plan = ComparisonPlan("code", (prompt,), Arm("plain"), Arm("plain"), args.max_tokens, 2, 2, 0.95)

    def bare() -> tuple[float, float]:
        first = last = 0.0
        count = 0
        own = 0.0
        for response in stream_generate(model, tokenizer, prompt.text, max_tokens=args.max_tokens):
            last = time.perf_counter()
            first = first or last
            count += 1
            own = response.generation_tps
        return (count - 1) / (last - first), own

    bare()
    run_trial(backend, prompt, Arm("plain"), plan, time.perf_counter)
    ratios, agreement = [], []
    for index in range(args.rounds):
        if index % 2:
            tps_bare, own = bare()
            tps_plugin = run_trial(backend, prompt, Arm("plain"), plan, time.perf_counter).decode_tps
        else:
            tps_plugin = run_trial(backend, prompt, Arm("plain"), plan, time.perf_counter).decode_tps
            tps_bare, own = bare()
        ratios.append(tps_plugin / tps_bare)
        agreement.append(tps_plugin / own)
    print(f"P1 plugin tok/s / bare mlx-lm loop tok/s: median {statistics.median(ratios):.3f} over {args.rounds} rounds")
    print(
        f"P2 plugin tok/s / mlx-lm generation_tps (of a bare run next to it): median {statistics.median(agreement):.3f}"
        f" ({args.max_tokens} tokens; mlx-lm counts n tokens over n-1 intervals)"
    )


if __name__ == "__main__":
    main()
