"""``pytest-specdec site OUT/``: the scoreboard as a static site (``--open`` for a local look)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(commands: Any) -> None:
    """Add the ``site`` sub-command."""
    site = commands.add_parser(
        "site", help="build the scoreboard: a static site of every verdict, per chip and release"
    )
    site.add_argument("out", type=Path, help="the folder to write (created, or an earlier site replaced whole)")
    site.add_argument("--baselines", type=Path, default=Path("baselines"), help="the store (default: baselines/)")
    site.add_argument("--results", type=Path, action="append", default=[],
                      help="a --specdec-json results file: tonight's readings (repeatable)")  # fmt: skip
    site.add_argument("--history", type=Path, action="append", default=[],
                      help="a history file of a runner's nights, such as the gate's nights.jsonl (repeatable)")  # fmt: skip
    site.add_argument("--community", type=Path, default=Path("community"),
                      help="submitted results, community/<machine class>/*.json (default: community/, if there)")  # fmt: skip
    site.add_argument("--open", action="store_true", help="open the front page in a browser")
    site.set_defaults(handler=_site)


def _site(args: argparse.Namespace) -> int:
    from pytest_specdec.errors import SpecdecUsageError
    from pytest_specdec.render.site import build_site

    if args.out.exists() and not args.out.is_dir():
        raise SpecdecUsageError(f"{args.out} is a file — name a folder for the site")
    from pytest_specdec.community.checks import check_submission
    from pytest_specdec.store.submissions import Submission

    def admit(submission: Submission) -> str | None:  # a submitted row is shown only as validate accepts it
        reasons = check_submission(submission, "").reasons
        return reasons[0] if reasons else None

    built = build_site(args.out, args.baselines, args.results, args.history, community=args.community, admit=admit)
    print(f"specdec site: {built.pages} page(s) in {args.out} — open {built.index}")
    if built.skipped:
        print(f"specdec site: skipped {len(built.skipped)} file(s) (listed on the front page): {built.skipped[0]}")
    if not args.results:
        print(f"specdec site: {_not_shown(args.baselines)}")
    if args.open:
        import webbrowser

        webbrowser.open(built.index.resolve().as_uri())
    return 0


BENCH_RESULTS = Path("bench-results.json")  # what ``make bench`` keeps


def _not_shown(baselines: Path) -> str:
    """Why a run the user just made is not on the site built without ``--results``: it shows accepted baselines.

    >>> _not_shown(Path("/nonexistent")).startswith("no --results: the site shows accepted baselines")
    True
    """
    from pytest_specdec.hardware import machine_class

    if BENCH_RESULTS.is_file():
        here = f"make bench's run ({BENCH_RESULTS}) is not on it — add --results {BENCH_RESULTS}"
    else:
        here = "a run of yours shows with --results FILE (pytest --specdec-json FILE writes one)"
    mine = "this machine among them" if (baselines / machine_class()).is_dir() else f"none of {machine_class()}"
    return f"no --results: the site shows accepted baselines ({mine}) and published figures; {here}"
