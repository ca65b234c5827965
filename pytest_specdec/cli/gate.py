"""``specdec gate measure|confirm|alert|notify``: the steps of the CI gate."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import load_run, read_json, write_atomically


def step(args: argparse.Namespace) -> int:
    from pytest_specdec import gate

    extra = shlex.split(args.pytest_args)
    if args.step == "measure":
        leg = gate.measure(args.backend, args.out, args.python, extra)
        write_atomically(args.out / "status.json", json.dumps(leg.__dict__) + "\n")
        print(f"specdec gate: {args.backend}: {leg.reason}")
        return 0
    found = read_json(args.out / "status.json") if (args.out / "status.json").is_file() else {}
    status = found if isinstance(found, dict) else {}
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
    listed = read_json(args.out / "confirm" / "confirmed.json")
    if not isinstance(listed, list):
        raise SpecdecUsageError(
            f"{args.out / 'confirm' / 'confirmed.json'} is not a list — re-run 'specdec gate confirm'"
        )
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


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``specdec gate``."""
    parser = commands.add_parser("gate", help="steps of the CI gate (see .github/workflows/specdec-gate.yml)")
    parser.add_argument("step", choices=("measure", "confirm", "alert", "notify"))
    parser.add_argument("--backend", required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for this backend's reports")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    parser.add_argument("--gh", default="gh", help="the GitHub CLI to call")
    parser.add_argument(
        "--pytest-args",
        default=os.environ.get("SPECDEC_GATE_PYTEST_ARGS", ""),
        help="extra pytest arguments, one string",
    )
    parser.set_defaults(handler=step)
