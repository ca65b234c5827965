"""``pytest-specdec claims``, ``evidence`` and ``calibrate``: the document, the world's figures, this machine."""

from __future__ import annotations

import argparse
import shutil
import textwrap
import time
from pathlib import Path

from tabulate import tabulate

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.nights import Night, read_nights

TORN: list[str] = []  # torn last lines met while reading histories, reported by the command


def claims(args: argparse.Namespace) -> int:
    """Every claim of the document, its bounds, what research found, and its latest verdict here."""
    from pytest_specdec.seed.document import CLAIMS

    latest: dict[str, Night] = {}
    for path in sorted((args.dir / "history").glob("*.jsonl")):
        for night in read_nights(path, TORN):
            said = night.claim_id
            if said is not None and (said not in latest or night.time >= latest[said].time):
                latest[said] = night
    rows = []
    for claim in CLAIMS.values():
        seen = latest.get(claim.id)
        verdict = (
            f"{seen.verdict} ({seen.profile or '?'}, {seen.machine_class}, {seen.time[:10]})"
            if seen
            else "not measured yet"
        )
        rows.append([claim.id, claim.section, claim.quote, claim.bounds, claim.applies_to, claim.research, verdict])
    headers = ("id", "section", "quote", "bounds", "applies to", "research", "latest verdict")
    widths = [None, 18, 36, 22, 16, 28, None]
    print(tabulate(rows, headers=headers, tablefmt="github" if args.markdown else "simple", maxcolwidths=widths))
    return 0


def evidence(args: argparse.Namespace) -> int:
    """Published SD measurements: per seed claim by chip generation, this machine's chip, and a plot."""
    from pytest_specdec.hardware import machine_class
    from pytest_specdec.seed.evidence import backend_family, chip_of, claims_table, load_evidence, plottable, rows_for

    rows = load_evidence()
    table = [list(row) for row in claims_table(rows)]
    width = shutil.get_terminal_size((120, 24)).columns  # COLUMNS, else the terminal's
    headers = ("claim", "chip", "published rows", "which")
    fixed = tabulate(table, headers=headers, maxcolwidths=[None, None, 24, 8]).splitlines()[0].index("which")
    print(tabulate(table, headers=headers, maxcolwidths=[None, None, 24, max(24, width - fixed)]))
    machine = args.machine or machine_class()
    here = rows_for(machine, rows)
    print(f"\npublished on {machine}: {len(here)} row(s)")
    for row in here:
        shown = f"{row.speedup:.2f}x" if row.speedup is not None else "-"
        said = f"  {row.id}: {row.backend} {row.method} {row.model}: {shown} ({row.link})"
        print("\n".join(textwrap.wrap(said, width, subsequent_indent="    ", break_long_words=False)))
    _submitted(args.community, machine)
    if args.plot is None:
        return 0
    from pytest_specdec.render.evidence_plot import OwnPoint, PublishedPoint, evidence_plot

    points = [
        PublishedPoint(str(r.chip), r.family, float(r.speedup or 0), r.roofline_suspect, r.id) for r in plottable(rows)
    ]
    own = []
    # This machine's results (or --machine's): the ones the title promises in black.
    for path in sorted((args.dir / "history").glob(f"{machine}.jsonl")):
        latest = {night.key: night for night in read_nights(path, TORN)}  # in time order: the last per key wins
        for night in latest.values():
            chip = chip_of(night.machine_class)
            if chip is None:
                continue
            s = night.speedup
            own.append(OwnPoint(chip[0], backend_family(night.backend), s.estimate, s.low, s.high, night.key))
    yours = f"{machine}'s in black" if own else f"no result of {machine}'s on a chip the evidence names"
    evidence_plot(points, own, args.plot, f"Published SD speedups by chip and runtime ({yours})")
    print(f"wrote {args.plot} ({len(own)} result(s) of {machine}'s drawn in black)")
    return 0


def _submitted(folder: Path, machine: str) -> None:
    """Submitted results (``pytest-specdec submit``'s files) that ``pytest-specdec validate`` finds consistent, per machine class:
    paired measurements, submitted and not reproduced."""
    from pytest_specdec.community.checks import check_submission
    from pytest_specdec.store.submissions import list_submissions, read_submission

    paths = list_submissions(folder)
    if not paths:
        return
    shown, rejected = [], 0
    for path in paths:
        try:
            submission = read_submission(path)
        except SpecdecUsageError:
            rejected += 1
            continue
        if not check_submission(submission, str(path)).accepted:
            rejected += 1
            continue
        c, s = submission.comparison, submission.comparison.speedup
        here = " (this machine's class)" if submission.machine.machine_class == machine else ""
        shown.append(
            f"  {submission.machine.machine_class}{here}: {c.backend} {c.release} {c.target}"
            f"{' + ' + c.draft if c.draft else ''} [{c.category}]: {s.estimate:.2f}x [{s.low:.2f}, {s.high:.2f}], "
            f"{len(c.samples)} pairs ({c.claim_id or c.nodeid.split('::')[-1]})"
        )
    print(f"\nsubmitted to {folder} (paired measurements; submitted, not reproduced): {len(shown)} consistent")
    for line in shown:
        print(line)
    if rejected:
        print(f"  ({rejected} file(s) left out: pytest-specdec validate rejects them)")


MIN_AA_PAIRS = 4  # the fewest A/A pairs whose spread and autocorrelation mean anything
DEFAULT_AA_PAIRS = 64  # 40 simulated machines read 0.35-1.95 % with 32 pairs, 0.40-1.00 % with 64 (true: about 0.7 %)


def calibrate(args: argparse.Namespace) -> int:
    """A/A pairs on this machine's backend: its noise, and what the default design can decide with it."""
    from pytest_specdec.backends import load_backend
    from pytest_specdec.calibration import calibrate as replay_design
    from pytest_specdec.calibration import measure_aa
    from pytest_specdec.config import build_settings, read_pyproject

    if args.pairs < MIN_AA_PAIRS:
        raise SpecdecUsageError(
            f"--pairs {args.pairs} is too few: A/A noise needs at least {MIN_AA_PAIRS} pairs (the default is {DEFAULT_AA_PAIRS})"
        )
    cli = {"backend": args.backend, "model": args.model, "profile": args.profile, "backend_option": tuple(args.option)}
    settings = build_settings(cli.get, lambda _: None, read_pyproject(Path.cwd()))
    backend = load_backend(settings.backend, settings.pair, settings.backend_options)
    started = time.monotonic()

    def progress(done: int) -> None:
        print(f"\r  A/A pair {done}/{args.pairs} ({time.monotonic() - started:.0f} s)", end="", flush=True)

    try:
        noise = measure_aa(backend, args.category, args.pairs, settings.max_tokens, progress)
    finally:
        backend.close()
    print()
    for line in replay_design(noise, settings.max_trials, settings.confidence).lines(settings.max_trials):
        print(line)
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``pytest-specdec claims``, ``pytest-specdec evidence`` and ``pytest-specdec calibrate``."""
    parser = commands.add_parser("claims", help="every claim of the seed document with its latest verdict")
    parser.add_argument("--dir", type=Path, default=Path("baselines"), help="baselines directory (reads history/)")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    parser.set_defaults(handler=claims)
    published = commands.add_parser("evidence", help="published SD measurements per chip, and where your runs stand")
    published.add_argument("--dir", type=Path, default=Path("baselines"), help="baselines directory (reads history/)")
    published.add_argument("--machine", help="machine class to list published rows for (default: this machine)")
    published.add_argument("--plot", type=Path, help="write the plot of published speedups by chip here (.png)")
    published.add_argument("--community", type=Path, default=Path("community"),
                           help="submitted results to list as paired measurements (default: community/, if there)")  # fmt: skip
    published.set_defaults(handler=evidence)
    calibration = commands.add_parser("calibrate", help="A/A pairs: this machine's noise, false decisions, power")
    calibration.add_argument("--backend", default=None, help="backend (default: as configured)")
    calibration.add_argument("--model", default=None, help="target model (default: as configured)")
    calibration.add_argument("--profile", default=None, help="model profile (embedded, gemma, seed, ...)")
    calibration.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="backend option")
    calibration.add_argument("--category", default="code", help="prompt category of the A/A pairs")
    calibration.add_argument(
        "--pairs", type=int, default=DEFAULT_AA_PAIRS, help=f"A/A pairs to measure (default {DEFAULT_AA_PAIRS})"
    )
    calibration.set_defaults(handler=calibrate)
