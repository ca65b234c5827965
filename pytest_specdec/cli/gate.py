"""``specdec gate STEP``: the steps of the CI gate, in the order the workflow runs them.

install → measure → summary → confirm → alert → notify on a night; ``upgrade`` between
install and measure when backends should move; ``lock`` after an accepting run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import load_run, read_json, write_atomically

if TYPE_CHECKING:
    from pytest_specdec.store.records import RunRecord

STEPS = ("install", "upgrade", "lock", "measure", "summary", "confirm", "alert", "notify")
BEFORE, AFTER, CHANGES = "versions-before.json", "versions-after.json", "release-changes.json"


def _pip(python: str, *args: str) -> None:
    extra = shlex.split(os.environ.get("SPECDEC_GATE_PIP_ARGS", ""))
    command = [python, "-m", "pip", "install", "-q", *extra, *args]
    print("specdec gate: " + " ".join(command[3:]), flush=True)
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise SpecdecUsageError(f"pip install {' '.join(args)} failed (exit {done.returncode}) — see the log above")


def _machine_class() -> str:
    from pytest_specdec.hardware import machine_class

    return machine_class()


def _versions(args: argparse.Namespace, packages: list[str]) -> dict[str, str]:
    """Versions as the leg's interpreter sees them (it may not be this one)."""
    code = (
        "import json,sys; from pytest_specdec.gate.releases import collect_versions as c; "
        "print(json.dumps(c(sys.argv[2:], sys.argv[1])))"
    )
    done = subprocess.run(
        [args.python, "-c", code, args.backend, *packages], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SpecdecUsageError(f"{args.python} cannot report versions: {done.stderr.strip()[-300:]}")
    found = json.loads(done.stdout)
    return {str(k): str(v) for k, v in found.items()}


def install(args: argparse.Namespace) -> int:
    """Install the leg's packages as pinned by the accepted run's lock (newest when there is none)."""
    from pytest_specdec.gate import legs, releases

    config = legs.read_gate_config(Path.cwd())
    packages = config.packages(args.backend)
    lock = releases.lock_path(args.baselines, _machine_class())
    pins = {line.split("==", 1)[0].lower(): line for line in releases.read_lock(lock)}
    wanted = [pins.get(name.lower(), name) for name in packages]
    if wanted:
        _pip(args.python, *wanted)
    pinned = [name for name in packages if name.lower() in pins]
    said = (
        f"pinned by {lock}"
        if pinned and len(pinned) == len(packages)
        else f"not pinned by {lock}: newest releases (accept a run to pin them)"
    )
    print(f"specdec gate: {args.backend}: {', '.join(wanted) or 'no packages'} — {said}")
    releases.write_versions(args.out / BEFORE, _versions(args, packages))
    return 0


def upgrade(args: argparse.Namespace) -> int:
    """Move the leg's packages (and the configured servers) to their newest releases; record the change."""
    from pytest_specdec.gate import legs, releases

    config = legs.read_gate_config(Path.cwd())
    packages = config.packages(args.backend)
    before = releases.read_versions(args.out / BEFORE) or _versions(args, packages)
    if packages:
        _pip(args.python, "--upgrade", *packages)
    if config.upgrade_servers:
        print(f"specdec gate: {config.upgrade_servers}", flush=True)
        done = subprocess.run(config.upgrade_servers, shell=True, check=False)  # the runner owner's own command
        if done.returncode != 0:
            print(f"specdec gate: warning: '{config.upgrade_servers}' exited {done.returncode}; servers unchanged")
    after = _versions(args, packages)
    releases.write_versions(args.out / AFTER, after)
    changes = releases.release_changes(before, after)
    write_atomically(args.out / CHANGES, json.dumps(changes, indent=2) + "\n")
    for line in changes or ["no release changed"]:
        print(f"specdec gate: {line}")
    return 0


def lock(args: argparse.Namespace) -> int:
    """Pin this leg's packages at the versions it was measured with; other legs' lines stay as they are."""
    from pytest_specdec.gate import legs, releases

    config = legs.read_gate_config(Path.cwd())
    packages = config.packages(args.backend)
    path = releases.lock_path(args.baselines, _machine_class())
    kept = {line.split("==", 1)[0].lower(): line for line in releases.read_lock(path)}
    installed = _versions(args, packages)
    fresh = {
        name.lower(): f"{name}=={version}"
        for name, version in installed.items()
        if name in packages and version != releases.NOT_INSTALLED
    }
    lines = sorted({**kept, **fresh}.values())
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, releases.LOCK_HEADER + "".join(f"{line}\n" for line in lines))
    print(f"specdec gate: pinned {len(lines)} package(s) in {path}")
    return 0


def _status(out: Path) -> dict[str, object]:
    found = read_json(out / "status.json") if (out / "status.json").is_file() else {}
    return found if isinstance(found, dict) else {}


def measure(args: argparse.Namespace) -> int:
    from pytest_specdec.gate import legs, runs

    config = legs.read_gate_config(Path.cwd())
    leg = runs.measure(config, args.backend, args.out, args.python, shlex.split(args.pytest_args))
    write_atomically(args.out / "status.json", json.dumps(leg.__dict__) + "\n")
    print(f"specdec gate: {args.backend}: {leg.reason}")
    if leg.fails_gate:
        print(f"specdec gate: FAIL — the required {args.backend} leg cannot be measured: {leg.reason}")
        return 1
    if leg.broken:
        print(f"specdec gate: FAIL — {args.backend}: {leg.broken}")
        return 1
    if not leg.measurable:
        print(f"::warning title=specdec gate ({args.backend})::optional leg {leg.reason}")
    return 0


def summary(args: argparse.Namespace) -> int:
    from pytest_specdec.gate import legs
    from pytest_specdec.gate.summary import leg_summary

    status = {"required": legs.read_gate_config(Path.cwd()).leg(args.backend).required, **_status(args.out)}
    print(leg_summary(args.backend, args.out, args.baselines, _machine_class(), status), end="")
    return 0


def after_measure(args: argparse.Namespace) -> int:
    """confirm, alert and notify: only for a leg that was measured."""
    from pytest_specdec.gate import alerts, legs, runs

    status = _status(args.out)
    if not status.get("measurable", False):
        print(f"specdec gate: {args.backend}: {status.get('reason', 'nothing was measured')} — nothing to {args.step}")
        return 0
    config = legs.read_gate_config(Path.cwd())
    results = args.out / "results.json"
    if args.step == "confirm":
        confirmed = runs.confirm(config, results, args.out / "confirm", args.python, shlex.split(args.pytest_args))
        print(f"specdec gate: {len(confirmed)} flipped conclusion(s) confirmed by a re-run")
        return 0
    run = load_run(results)
    if args.step == "notify":
        url = os.environ.get("SPECDEC_WEBHOOK_URL", "")
        print(alerts.notify(run, url) if url else "specdec gate: no SPECDEC_WEBHOOK_URL — nothing sent")
        return 0
    return alert(args, run, config.alert_on_erosion)


def alert(args: argparse.Namespace, run: RunRecord, on_erosion: bool) -> int:
    from pytest_specdec.gate import alerts
    from pytest_specdec.gate.summary import leg_erosions
    from pytest_specdec.store.records import Change

    listed = read_json(args.out / "confirm" / "confirmed.json")
    if not isinstance(listed, list):
        raise SpecdecUsageError(
            f"{args.out / 'confirm' / 'confirmed.json'} is not a list — re-run 'specdec gate confirm'"
        )
    keys = {(item["nodeid"], item["category"]) for item in listed}
    confirmed = [r for r in run.flips if (r.nodeid, r.category) in keys]
    changes_file = args.out / CHANGES
    changes = json.loads(changes_file.read_text(encoding="utf-8")) if changes_file.is_file() else []
    for line in alerts.alert(run, confirmed, args.gh, alerts.run_url(), changes):
        print(f"specdec gate: {line}")
    rebaselined = [r for r in run.comparisons if r.check is not None and r.check.change is Change.REBASELINE]
    if rebaselined:
        print(
            f"::warning title=specdec gate ({args.backend})::{len(rebaselined)} result(s) were measured under another "
            "measurement protocol than their baselines: nothing is compared until they are accepted — run the "
            "specdec accept workflow"
        )
    undecided = [r for r in run.comparisons if r.check is not None and r.check.change is Change.UNDECIDED]
    if undecided:
        print(
            f"specdec gate: {len(undecided)} comparison(s) undecided (inconclusive against a decisive baseline) "
            "— not a flip, nothing opened"
        )
    if on_erosion:
        for trend in leg_erosions(args.backend, args.baselines, run.machine_class):
            title = f"specdec: eroding — {trend.text.split(':', 1)[0]} on {run.machine_class} ({args.backend})"
            body = f"{trend.text}\n\nRun: {alerts.run_url()}\n"
            print(f"specdec gate: {alerts.post_issue(args.gh, title, body)}")
    if confirmed:
        print(f"specdec gate: FAIL — {len(confirmed)} conclusion(s) changed and were confirmed")
        return 1
    if run.flips:
        print(f"specdec gate: {len(run.flips)} flip(s) did not repeat on the re-run — no issue opened")
    return 0


HANDLERS = {"install": install, "upgrade": upgrade, "lock": lock, "measure": measure, "summary": summary}


def step(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    return HANDLERS.get(args.step, after_measure)(args)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``specdec gate``."""
    parser = commands.add_parser("gate", help="steps of the CI gate (see .github/workflows/specdec-gate.yml)")
    parser.add_argument("step", choices=STEPS)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for this backend's reports")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    parser.add_argument("--gh", default="gh", help="the GitHub CLI to call")
    parser.add_argument("--baselines", type=Path, default=Path("baselines"), help="the baselines folder")
    parser.add_argument(
        "--pytest-args",
        default=os.environ.get("SPECDEC_GATE_PYTEST_ARGS", ""),
        help="extra pytest arguments, one string",
    )
    parser.set_defaults(handler=step)
