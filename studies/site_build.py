"""How long the scoreboard takes to build from a large store, how big its pages are, and what one more night costs.

Run: ``python -m studies.site_build`` (the issue's scale: 10 machine classes × 6 backends × 12 claims × 365
nights; ``--machines/--backends/--claims/--nights`` to scale it). Not collected by pytest.

The store is synthetic, built from one real accepted result of this repository (``baselines/NVIDIA-H200``)
with its machine class, backend, claim and nights varied: each key gets an accepted entry and a history line
a night (a release every 60 nights, a flip now and then). Timed: the full build into an empty folder, then a
rebuild after one more night of every key (the plots whose nights changed are redrawn; the rest are kept).
Printed: both times, the page count, the largest page and plot, and the total size.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pytest_specdec.render.site import build_site
from pytest_specdec.stats import Interval
from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, load_any
from pytest_specdec.store.nights import Night
from pytest_specdec.store.records import Change, CheckRecord, ComparisonRecord, Provenance

REPO = Path(__file__).resolve().parents[2]  # the checkout (this file lies in pytest_specdec/benchmarks)


def one_real_result() -> ComparisonRecord:
    """An accepted result of this repository, the template every synthetic key is made from."""
    loaded = load_any(REPO / "baselines" / "NVIDIA-H200" / "mlx.json")
    return next(iter(loaded.entries.values())).result


def night_line(record: ComparisonRecord, machine: str, night: int, start: datetime, rng: random.Random) -> Night:
    estimate = 1.1 + 0.2 * rng.random()
    interval = Interval(estimate, estimate * 0.92, estimate * 1.08, 0.98, 96)
    flipped = rng.random() < 0.01
    tonight = replace(record, speedup=interval, release=f"mlx-lm 0.{30 + night // 60}.0",
                      check=CheckRecord(Change.FLIP if flipped else Change.UNCHANGED, ""))  # fmt: skip
    return Night.of_record(tonight, machine, False, (start + timedelta(days=night)).isoformat())


def build_store(root: Path, machines: int, backends: int, claims: int, nights: int) -> int:
    """The synthetic store under ``root``; the number of keys."""
    template, rng = one_real_result(), random.Random(7)
    start = datetime(2025, 12, 1, 3, 0, tzinfo=UTC)
    keys = 0
    for m in range(machines):
        machine = f"Apple-M{1 + m // 3}-{['Pro', 'Max', 'Ultra'][m % 3]}-{32 * (1 + m % 3)}GB"
        store, lines = BaselineStore(root, machine), []
        for b in range(backends):
            backend = f"backend{b}"
            entries = {}
            for c in range(claims):
                record = replace(template, backend=backend, claim_id=f"claim{c}",
                                 nodeid=f"benchmarks/test_claim{c}.py::test_claim{c}[code]")  # fmt: skip
                entries[f"k{c}"] = BaselineEntry(record, Provenance.MEASURED, start.isoformat())
                lines += [night_line(record, machine, n, start, rng) for n in range(nights)]
                keys += 1
            store.write(backend, {r.result.nodeid + r.result.backend: r for r in entries.values()})
        store.append_history(lines)
    return keys


def one_more_night(root: Path, nights: int) -> None:
    """Tonight's line for every key of the store."""
    rng, start = random.Random(8), datetime(2025, 12, 1, 3, 0, tzinfo=UTC)
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in ("history", "candidates")):
        store = BaselineStore(root, folder.name)
        lines = [night_line(entry.result, folder.name, nights, start, rng)
                 for path in sorted(folder.glob("*.json")) for entry in load_any(path).entries.values()]  # fmt: skip
        store.append_history(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--machines", type=int, default=10)
    parser.add_argument("--backends", type=int, default=6)
    parser.add_argument("--claims", type=int, default=12)
    parser.add_argument("--nights", type=int, default=365)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root, out = Path(folder) / "baselines", Path(folder) / "site"
        began = time.perf_counter()
        keys = build_store(root, args.machines, args.backends, args.claims, args.nights)
        print(f"store: {keys} keys × {args.nights} nights in {time.perf_counter() - began:.1f} s")
        began = time.perf_counter()
        built = build_site(out, root)
        full = time.perf_counter() - began
        one_more_night(root, args.nights)
        began = time.perf_counter()
        build_site(out, root)
        again = time.perf_counter() - began
        pages = list(out.rglob("*.html"))
        plots = list(out.rglob("*.svg"))
        largest = max(pages, key=lambda p: p.stat().st_size)
        print(f"full build: {full:.1f} s, {built.pages} pages; one more night of every key: {again:.1f} s")
        print(f"largest page: {largest.stat().st_size / 1024:.0f} KiB ({largest.name}); largest plot: "
              f"{max((p.stat().st_size for p in plots), default=0) / 1024:.0f} KiB; site: "
              f"{sum(p.stat().st_size for p in out.rglob('*') if p.is_file()) / 2**20:.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
