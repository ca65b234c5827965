"""``pytest-specdec report`` and ``pytest-specdec plot-history``: stored results rendered again."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.render.report import markdown_report
from pytest_specdec.store.files import load_run
from pytest_specdec.store.nights import read_nights
from pytest_specdec.store.records import RunRecord

TORN: list[str] = []  # torn last lines met while reading histories, reported by the command


def report(args: argparse.Namespace) -> int:
    from pytest_specdec.store.files import write_atomically

    if args.png and args.png.suffix.lower() != ".png":
        raise SpecdecUsageError(f"--png {args.png} must name a .png file")
    for option, path in (("--md", args.md), ("--png", args.png)):
        if path is not None and not path.parent.is_dir():
            raise SpecdecUsageError(f"{option} {path}: the folder {path.parent} does not exist — create it first")
    runs = [load_results(path) for path in args.results]
    run = replace(
        runs[0],
        comparisons=tuple(c for r in runs for c in r.comparisons),
        summary=tuple(line for r in runs for line in r.summary),
    )
    # Several files: one section each, headed by its path, so every row says which file it came from.
    text = (
        markdown_report(run)
        if len(runs) == 1
        else "\n".join(markdown_report(r, source=str(p)) for p, r in zip(args.results, runs, strict=True))
    )
    if args.md:
        write_atomically(args.md, text)
        print(f"wrote {args.md}")
    if args.png:
        from pytest_specdec.render.plots import forest_plot

        forest_plot(list(run.comparisons), args.png, f"pytest-specdec on {run.machine_class}")
        print(f"wrote {args.png}")
    if not args.md and not args.png:
        print(text, end="")
    return 1 if run.flips else 0


def load_results(path: Path) -> RunRecord:
    """A ``--specdec-json`` results file, or a baselines or candidates file (its entries as one run)."""
    from pytest_specdec.store.baselines import load_any
    from pytest_specdec.store.files import read_json

    data = read_json(path)
    if isinstance(data, dict) and "entries" in data and "comparisons" not in data:
        stored = load_any(path)
        results = tuple(entry.result for _, entry in sorted(stored.entries.items()))
        return RunRecord(machine_class=stored.machine_class, started="", finished="", comparisons=results)
    return load_run(path)


def plot_history(args: argparse.Namespace) -> int:
    from pytest_specdec.render.plots import history_plot

    histories = sorted((args.dir / "history").glob("*.jsonl"))
    if args.machine:
        histories = [p for p in histories if p.stem == args.machine]
    if not histories:
        raise SpecdecUsageError(f"no history under {args.dir / 'history'} — run the benchmarks first")
    lines = tuple(
        night for path in histories for night in read_nights(path, TORN)
        if (not args.backend or night.backend == args.backend) and (not args.match or args.match in night.key)
    )  # fmt: skip
    if not lines:
        raise SpecdecUsageError("no history line matches the filters — loosen --backend / --match")
    history_plot(lines, args.out, "speedup by backend release")
    print(f"wrote {args.out} ({len(lines)} results)")
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``pytest-specdec report`` and ``pytest-specdec plot-history``."""
    parser = commands.add_parser("report", help="render --specdec-json results, baselines or candidates files")
    parser.add_argument("results", type=Path, nargs="+",
                        help="--specdec-json, baselines or candidates files (several: a section each)")  # fmt: skip
    parser.add_argument("--md", type=Path, help="write Markdown here (default: print it)")
    parser.add_argument("--png", type=Path, help="write the forest plot here")
    parser.set_defaults(handler=report)
    history = commands.add_parser("plot-history", help="speedup against backend release, from the history")
    history.add_argument("--dir", type=Path, default=Path("baselines"), help="baselines directory")
    history.add_argument("--machine", help="only this machine class")
    history.add_argument("--backend", help="only this backend")
    history.add_argument("--match", help="only keys containing this text (e.g. a node id)")
    history.add_argument("--out", type=Path, default=Path("specdec-history.png"), help="PNG to write")
    history.set_defaults(handler=plot_history)
