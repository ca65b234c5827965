"""The ``specdec`` command: baselines, reports and history outside a pytest run.

It never imports the pytest plugin module. Bad input prints one line on stderr and
exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from tabulate import tabulate

from pytest_specdec.config import requested_backend
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.render.report import interval_cell, markdown_report
from pytest_specdec.store.baselines import (
    BaselineFile,
    list_baseline_files,
    load_any,
    read_baseline_file,
    read_history,
)
from pytest_specdec.store.files import dumps, load_run

Command = Callable[[argparse.Namespace], int]


def _baselines_list(args: argparse.Namespace) -> int:
    rows = []
    for path in list_baseline_files(args.dir):
        stored = load_any(path)
        if args.machine and stored.machine_class != args.machine:
            continue
        for key, entry in sorted(stored.entries.items()):
            r = entry.result
            rows.append(
                [
                    stored.machine_class,
                    stored.backend,
                    key,
                    interval_cell(r.speedup),
                    r.release,
                    r.verdict,
                    entry.provenance,
                ]
            )
    if not rows:
        print(f"no baselines under {args.dir}")
        return 0
    headers = ("machine class", "backend", "key", "speedup", "release", "verdict", "provenance")
    print(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
    return 0


def _baselines_show(args: argparse.Namespace) -> int:
    matches = []
    for path in list_baseline_files(args.dir):
        stored = load_any(path)
        matches += [(path, key, entry) for key, entry in stored.entries.items() if args.key in key]
    if not matches:
        raise SpecdecUsageError(
            f"no baseline under {args.dir} has a key containing {args.key!r} — see 'specdec baselines list'"
        )
    for path, key, entry in matches:
        print(f"# {path}: {key}")
        print(dumps(entry), end="")
    return 0


def _baselines_diff(args: argparse.Namespace) -> int:
    """Candidates against the accepted baselines: what accepting them would change."""
    rows = []
    candidates_root = args.dir / "candidates"
    for path in list_baseline_files(candidates_root):
        pending = load_any(path)
        accepted = read_baseline_file(
            args.dir / pending.machine_class / f"{pending.backend}.json", pending.machine_class, pending.backend
        )
        rows += _diff_rows(pending, accepted)
    if not rows:
        print(f"no candidates under {candidates_root}")
        return 0
    headers = ("machine class", "backend", "key", "accepted", "candidate", "verdicts")
    print(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
    return 0


def _diff_rows(pending: BaselineFile, accepted: BaselineFile) -> list[list[str]]:
    rows = []
    for key, entry in sorted(pending.entries.items()):
        old = accepted.entries.get(key)
        new = entry.result
        before = f"{interval_cell(old.result.speedup)} ({old.result.release})" if old else "(none)"
        after = f"{interval_cell(new.speedup)} ({new.release})"
        verdicts = f"{old.result.verdict.value} → {new.verdict.value}" if old else new.verdict.value
        rows.append([pending.machine_class, pending.backend, key, before, after, verdicts])
    return rows


def _report(args: argparse.Namespace) -> int:
    from pytest_specdec.store.files import write_atomically

    runs = [load_run(path) for path in args.results]
    run = replace(runs[0], comparisons=tuple(c for r in runs for c in r.comparisons))
    text = markdown_report(run)
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


def _plot_history(args: argparse.Namespace) -> int:
    from pytest_specdec.render.plots import history_plot

    histories = sorted((args.dir / "history").glob("*.jsonl"))
    if args.machine:
        histories = [p for p in histories if p.stem == args.machine]
    if not histories:
        raise SpecdecUsageError(f"no history under {args.dir / 'history'} — run the benchmarks first")
    lines = [line for path in histories for line in read_history(path)]
    if args.backend:
        lines = [line for line in lines if line.get("backend") == args.backend]
    if args.match:
        lines = [line for line in lines if args.match in str(line.get("key", ""))]
    if not lines:
        raise SpecdecUsageError("no history line matches the filters — loosen --backend / --match")
    history_plot(lines, args.out, "speedup by backend release")
    print(f"wrote {args.out} ({len(lines)} results)")
    return 0


NATIVE_FIRST = {"llama-cpp": "llama_cpp"}


def run_pytest(argv: Sequence[str]) -> int:
    """``specdec pytest ARGS``: pytest in this process, the backend's native libraries loaded first.

    On CUDA images where numpy's native libraries, once loaded, make llama.cpp's first
    ``Llama(...)`` crash, any pytest plugin that imports numpy at start-up (jaxtyping,
    hypothesis extensions, …) is enough to trigger it; loading ``llama_cpp`` before
    pytest and its plugins avoids it.
    """
    import importlib
    import importlib.util

    module = NATIVE_FIRST.get(requested_backend(argv) or "")
    if module is not None and importlib.util.find_spec(module) is not None:
        importlib.import_module(module)
    import pytest

    return int(pytest.main(list(argv)))


def _claims(args: argparse.Namespace) -> int:
    """Every claim of the document, its bounds, what research found, and its latest verdict here."""
    from pytest_specdec.seed.document import CLAIMS

    latest: dict[str, dict[str, object]] = {}
    for path in sorted((args.dir / "history").glob("*.jsonl")):
        for line in read_history(path):
            claim = line.get("claim_id")
            if isinstance(claim, str) and str(line.get("time", "")) >= str(latest.get(claim, {}).get("time", "")):
                latest[claim] = line
    rows = []
    for claim in CLAIMS.values():
        seen = latest.get(claim.id)
        verdict = (
            f"{seen['verdict']} ({seen.get('profile', '?')}, {seen['machine_class']}, {str(seen['time'])[:10]})"
            if seen
            else "not measured yet"
        )
        rows.append([claim.id, claim.section, claim.quote, claim.bounds, claim.research, verdict])
    headers = ("id", "section", "quote", "bounds", "research", "latest verdict")
    widths = [None, 18, 40, 24, 30, None]
    print(tabulate(rows, headers=headers, tablefmt="github" if args.markdown else "simple", maxcolwidths=widths))
    return 0


def _gate(args: argparse.Namespace) -> int:
    from pytest_specdec import gate

    extra = shlex.split(args.pytest_args)
    if args.step == "measure":
        leg = gate.measure(args.backend, args.out, args.python, extra)
        (args.out / "status.json").write_text(json.dumps(leg.__dict__) + "\n", encoding="utf-8")
        print(f"specdec gate: {args.backend}: {leg.reason}")
        return 0
    status = (
        json.loads((args.out / "status.json").read_text(encoding="utf-8"))
        if (args.out / "status.json").is_file()
        else {}
    )
    if not status.get("measurable", False):
        print(f"specdec gate: {args.backend}: {status.get('reason', 'nothing was measured')} — nothing to {args.step}")
        return 0
    results = args.out / "results.json"
    if args.step == "confirm":
        confirmed = gate.confirm(results, args.out / "confirm", args.python, extra)
        print(f"specdec gate: {len(confirmed)} flipped conclusion(s) confirmed by a re-run")
        return 0
    run = load_run(results)
    if args.step == "notify":
        url = os.environ.get("SPECDEC_WEBHOOK_URL", "")
        print(gate.notify(run, url) if url else "specdec gate: no SPECDEC_WEBHOOK_URL — nothing sent")
        return 0
    listed = json.loads((args.out / "confirm" / "confirmed.json").read_text(encoding="utf-8"))
    keys = {(item["nodeid"], item["category"]) for item in listed}
    confirmed = [r for r in run.flips if (r.nodeid, r.category) in keys]
    for line in gate.alert(run, confirmed, args.gh, gate.run_url()):
        print(f"specdec gate: {line}")
    flips = len(run.flips)
    if confirmed:
        print(f"specdec gate: FAIL — {len(confirmed)} conclusion(s) changed and were confirmed")
        return 1
    if flips:
        print(f"specdec gate: {flips} flip(s) did not repeat on the re-run — no issue opened")
    return 0


def _standin(args: argparse.Namespace) -> int:
    from pytest_specdec.standins.__main__ import main as serve

    return serve([args.kind, "--port", str(args.port), *(f"--fault={f}" for f in args.fault)])


def build_parser() -> argparse.ArgumentParser:
    """The ``specdec`` argument parser."""
    parser = argparse.ArgumentParser(prog="specdec", description="pytest-specdec baselines, reports and history")
    commands = parser.add_subparsers(dest="command", required=True)

    baselines = commands.add_parser("baselines", help="inspect accepted baselines and candidates")
    actions = baselines.add_subparsers(dest="action", required=True)
    for name, handler, help_text in (
        ("list", _baselines_list, "one line per accepted baseline"),
        ("show", _baselines_show, "every field of the baselines whose key contains KEY"),
        ("diff", _baselines_diff, "candidates against the accepted baselines"),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("--dir", type=Path, default=Path("baselines"), help="baselines directory")
        if name == "show":
            action.add_argument("key", help="part of a baseline key (e.g. a node id)")
        if name == "list":
            action.add_argument("--machine", help="only this machine class")
        action.set_defaults(handler=handler)

    report = commands.add_parser("report", help="render a --specdec-json results file")
    report.add_argument("results", type=Path, nargs="+", help="one or more --specdec-json files (same machine)")
    report.add_argument("--md", type=Path, help="write Markdown here (default: print it)")
    report.add_argument("--png", type=Path, help="write the forest plot here")
    report.set_defaults(handler=_report)

    history = commands.add_parser("plot-history", help="speedup against backend release, from the history")
    history.add_argument("--dir", type=Path, default=Path("baselines"), help="baselines directory")
    history.add_argument("--machine", help="only this machine class")
    history.add_argument("--backend", help="only this backend")
    history.add_argument("--match", help="only keys containing this text (e.g. a node id)")
    history.add_argument("--out", type=Path, default=Path("specdec-history.png"), help="PNG to write")
    history.set_defaults(handler=_plot_history)

    gate_parser = commands.add_parser("gate", help="steps of the CI gate (see .github/workflows/specdec-gate.yml)")
    gate_parser.add_argument("step", choices=("measure", "confirm", "alert", "notify"))
    gate_parser.add_argument("--backend", required=True)
    gate_parser.add_argument("--out", type=Path, required=True, help="folder for this backend's reports")
    gate_parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    gate_parser.add_argument("--gh", default="gh", help="the GitHub CLI to call")
    gate_parser.add_argument(
        "--pytest-args",
        default=os.environ.get("SPECDEC_GATE_PYTEST_ARGS", ""),
        help="extra pytest arguments, one string",
    )
    gate_parser.set_defaults(handler=_gate)
    claims = commands.add_parser("claims", help="every claim of the seed document with its latest verdict")
    claims.add_argument("--dir", type=Path, default=Path("baselines"), help="baselines directory (reads history/)")
    claims.add_argument("--markdown", action="store_true", help="a Markdown table")
    claims.set_defaults(handler=_claims)
    commands.add_parser(
        "pytest", help="run pytest with the backend's native libraries loaded first (CUDA images: see README)"
    )
    standin = commands.add_parser("standin", help="serve a stand-in Ollama / MTPLX / llama-server on loopback")
    standin.add_argument("kind", choices=("ollama", "mtplx", "llama-server"))
    standin.add_argument("--port", type=int, default=0)
    standin.add_argument(
        "--fault", action="append", default=[], help="inject a fault (see pytest_specdec.standins.http)"
    )
    standin.set_defaults(handler=_standin)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``specdec`` console script."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["pytest"]:
        return run_pytest(arguments[1:])
    args = build_parser().parse_args(arguments)
    handler: Command = args.handler
    try:
        return handler(args)
    except SpecdecUsageError as error:
        print(f"specdec: error: {error}", file=sys.stderr)
        return 2
    except ImportError as error:
        print(f"specdec: error: {error.name} is not installed — pip install 'pytest-specdec[plot]'", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"specdec: error: {error.filename or ''}: {error.strerror or error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
