"""The first block against the rest: does a comparison's first block carry warm-up cost?

Run: ``python -m studies.first_block docs/h200/mlx-*.json`` (result files written by
``--specdec-json``). Not collected by pytest.

A backend that compiles per shape (mlx on a GPU) once made each prompt's first SD
generation 10-30x slower; the protocol now warms every arm on every prompt. For each
comparison this prints the first block's (2 pairs a prompt) median tok/s of each arm
and median speedup beside the later blocks', with a two-sided Mann-Whitney p-value per
column. Machine drift moves both arms alike and leaves the speedup; a warm-up left in
one arm moves the speedup.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

from scipy import stats


def _p_value(first: list[float], rest: list[float]) -> float:
    return float(stats.mannwhitneyu(first, rest, alternative="two-sided").pvalue)


def rows(result: dict[str, Any]) -> list[list[str]]:
    """One row per comparison: first block ÷ later blocks for plain, SD and the speedup."""
    table = []
    for comparison in result["comparisons"]:
        samples = comparison["samples"]
        block = 2 * int(comparison["scope"].get("prompt_count", 1))
        if len(samples) <= block:
            continue
        cells = [comparison.get("profile", ""), comparison["category"], str(len(samples))]
        columns = {
            "plain": [s["baseline_tps"] for s in samples],
            "sd": [s["treatment_tps"] for s in samples],
            "speedup": [math.log(s["treatment_tps"] / s["baseline_tps"]) for s in samples],
        }
        for name, values in columns.items():
            first, rest = values[:block], values[block:]
            first_m, rest_m = statistics.median(first), statistics.median(rest)
            shown = (
                f"{math.exp(first_m):.2f}x vs {math.exp(rest_m):.2f}x"
                if name == "speedup"
                else f"{first_m:.0f} vs {rest_m:.0f}"
            )
            cells.append(f"{shown} (p={_p_value(first, rest):.2f})")
        table.append(cells)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path)
    args = parser.parse_args()
    print("| profile | category | pairs | plain tok/s first vs rest | SD tok/s first vs rest | speedup first vs rest |")
    print("|---|---|---|---|---|---|")
    for path in args.results:
        for cells in rows(json.loads(path.read_text())):
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
