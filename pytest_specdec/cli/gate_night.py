"""``pytest-specdec gate night|verdict|accept-candidates|watchdog|adopt-issues|init``: the night as a whole.

``night`` ends the measuring job of one leg (its ``night.json``); ``verdict`` and
``accept-candidates`` run in the alert job, which holds the write token and reads only
the artifacts; ``watchdog`` runs on a hosted runner and notices a night that did not
happen; ``adopt-issues``, run once after upgrading, brings the issues the gate opened before
they were keyed under its label; ``init`` writes ``[tool.specdec.gate]`` legs for the machine
it runs on.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError


def _machine_class() -> str:
    from pytest_specdec.hardware import machine_class

    return machine_class()


def night(args: argparse.Namespace) -> int:
    """Write the leg's ``night.json``; exit 1 when a required leg has a red finding."""
    from pytest_specdec.gate.leg_account import leg_night, write_night, write_nights
    from pytest_specdec.gate.legs import read_gate_config

    leg = leg_night(read_gate_config(Path.cwd()), args.backend, args.out, args.baselines, _machine_class())
    print(f"specdec gate: wrote {write_night(leg, args.out)} and {write_nights(leg, args.out)}")
    for finding in leg.findings:
        print(f"specdec gate: {args.backend}: {finding.state.value} — {finding.subject}: {finding.message}")
    if leg.red:
        print(f"specdec gate: FAIL — the required {args.backend} leg is red: {leg.red[0].state.value}")
        return 1
    return 0


def verdict(args: argparse.Namespace) -> int:
    """Read every leg's night, decide the colour, tell GitHub; exit 1 on a red night."""
    import json
    import os

    from pytest_specdec.gate import alert_job as judge
    from pytest_specdec.gate.alerts import run_url
    from pytest_specdec.gate.legs import read_gate_config

    config = read_gate_config(Path.cwd())
    if args.runner and args.runner not in config.runners:
        raise SpecdecUsageError(
            f"--runner {args.runner!r} is not a runner of [tool.specdec.gate.runners] "
            f"({', '.join(config.runners) or 'none configured'})"
        )
    planned = json.loads(args.legs) if args.legs else list(config.runner_legs(args.runner))
    if not isinstance(planned, list):
        raise SpecdecUsageError(f"--legs {args.legs!r} must be a JSON list of leg names")
    expected = {str(name): config.leg(str(name)).required for name in planned}
    colour, legs, refused = judge.decide(args.artifacts, expected, args.runner)
    summary = judge.night_summary(colour, legs, refused)
    print(summary, end="")
    target = os.environ.get("GITHUB_STEP_SUMMARY", "")
    if target:
        with Path(target).open("a", encoding="utf-8") as stream:
            stream.write(summary)
    for line in refused:
        print(f"specdec gate: refused: {line}")
    for line in judge.workflow_commands(colour, legs):
        print(line)
    for line in judge.tell(legs, args.gh, run_url(), args.runner):
        print(f"specdec gate: {line}")
    _notify(args.artifacts, os.environ.get("SPECDEC_WEBHOOK_URL", ""))
    print(f"specdec gate: the night is {'RED' if colour.red else 'green'}")
    return 1 if colour.red else 0


def _notify(artifacts: Path, url: str) -> None:
    """Each measured leg's verdicts to the webhook (a results file that does not validate is skipped, said)."""
    if not url:
        return
    from pytest_specdec.errors import SpecdecUsageError
    from pytest_specdec.gate.alerts import notify
    from pytest_specdec.store.files import load_run

    for results in sorted(artifacts.glob("*/results.json")):
        try:
            print(f"specdec gate: {results.parent.name}: {notify(load_run(results), url)}")
        except SpecdecUsageError as error:
            print(f"specdec gate: refused: {error}")


def accept_candidates(args: argparse.Namespace) -> int:
    """Merge the night's candidates into the accepted baselines and pin their releases (for the accept PR)."""
    from pytest_specdec.gate.accepting import accept_from_artifacts

    lines, machines = accept_from_artifacts(args.artifacts, args.baselines)
    for line in lines:
        print(f"specdec gate: {line}")
    if args.machine_file is not None and machines:  # what the pull request's branch is named after
        args.machine_file.write_text("\n".join(sorted(machines)) + "\n", encoding="utf-8")
    return 0


def watchdog(args: argparse.Namespace) -> int:
    """Red, and one issue, when no night has completed for ``--hours``."""
    from pytest_specdec.gate.legs import read_gate_config
    from pytest_specdec.gate.watchdog import check_nights

    runners = read_gate_config(Path.cwd()).labels  # a fleet's runners each have their nights counted
    quiet, lines = check_nights(args.gh, args.workflow, args.hours, runners=runners)
    for line in lines:
        print(f"specdec gate: {line}")
    return 1 if quiet else 0


def adopt_issues(args: argparse.Namespace) -> int:
    """Bring the gate's open issues from before alerts were keyed under the label, each with its marker line."""
    from pytest_specdec.gate.alerts import adopt_legacy

    adopted = adopt_legacy(args.gh)
    for key, issue in sorted(adopted.items(), key=lambda item: item[1].number):
        print(f"specdec gate: adopted #{issue.number}: {key.title}")
    print(f"specdec gate: {len(adopted)} issue(s) from before alerts were keyed adopted")
    return 0


def init(args: argparse.Namespace) -> int:
    """Print (or append to pyproject.toml) legs for what this machine has installed; with ``--write`` also the
    gate's workflows and scripts (those missing), with ``--workflows`` only those (replacing older ones)."""
    from pytest_specdec.gate.init import NO_LEG, NO_TARGETS, append_to_pyproject, gate_table, lock_steps
    from pytest_specdec.gate.workflow_files import write_gate_files

    root = Path.cwd()
    if args.workflows:
        for line in write_gate_files(root, replace=True).lines():
            print(f"specdec gate: {line}")
        return 0
    text, legs = gate_table(root, args.runner)
    if not args.write:
        print(text, end="")
        return 0 if legs else 1
    if not legs:
        print(
            f"specdec gate: {NO_TARGETS if NO_TARGETS in text else NO_LEG}; nothing was written to pyproject.toml or .github/"
        )
        return 1
    print(f"specdec gate: {append_to_pyproject(root / 'pyproject.toml', text)} ({legs} leg(s))")
    for line in [*write_gate_files(root, replace=False).lines(), *lock_steps(root, args.runner)]:
        print(f"specdec gate: {line}")
    return 0


def resolve(args: argparse.Namespace) -> int:
    """Resolve a hashed lock for a platform (``--for measure``: a runner's venv; ``alert``: the hosted jobs')."""
    from pytest_specdec.gate.resolve_lock import Request, lock
    from pytest_specdec.store.files import write_atomically

    request = Request(args.platform, args.what, Path.cwd(), args.specdec_wheel, args.extras, tuple(args.find_links))
    problem = request.problem()
    if problem:
        raise SpecdecUsageError(problem)
    text, count = lock(request)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out, text)
    print(f"specdec gate: {args.out}: {count} package(s) for {args.platform}, each with its hash")
    return 0


def try_locally(args: argparse.Namespace) -> int:
    """One night of the repository's gate on this machine (act, stand-in GitHub pieces); 0 when it is green."""
    from pytest_specdec.gate.legs import read_gate_config
    from pytest_specdec.gate.local_night import try_night

    root = Path.cwd()
    config = read_gate_config(root)
    if args.workflow == "specdec-accept.yml" and args.leg == "all":
        raise SpecdecUsageError("the accept workflow measures one leg — name it: --leg NAME")
    inputs = {"leg": args.leg, "upgrade": str(args.upgrade).lower()}
    if args.workflow == "specdec-gate.yml":
        inputs["runner"] = args.runner or "all"
    elif args.runner:
        inputs["runner"] = args.runner
    print(f"specdec gate: trying {args.workflow} here (act, stand-in GitHub pieces; nothing reaches GitHub)")
    tried = try_night(root, args.workflow, inputs, [*config.runs_on, *config.runners], install=args.install,
                      environment={"SPECDEC_GATE_PYTEST_ARGS": args.pytest_args})  # fmt: skip
    for line in tried.lines():
        print(f"specdec gate try: {line}")
    return 0 if tried.green or (tried.returncode == 0 and args.workflow != "specdec-gate.yml") else 1


def register(gate: argparse._SubParsersAction[argparse.ArgumentParser], leg: argparse.ArgumentParser) -> None:
    """The night's commands under ``pytest-specdec gate``; ``leg`` holds the per-leg arguments."""
    from pytest_specdec.gate.init import runner_kinds
    from pytest_specdec.hardware import lock_platform

    parser = gate.add_parser("night", parents=[leg], help="the leg's night.json (ends the measuring job)")
    parser.set_defaults(handler=night)
    parser = gate.add_parser("verdict", help="read every leg's night.json, decide the colour, open issues")
    parser.add_argument("--artifacts", type=Path, required=True, help="folder with one sub-folder per leg")
    parser.add_argument("--gh", default="gh", help="the GitHub CLI to call")
    parser.add_argument("--legs", default="", help="the legs planned tonight, as JSON (default: every configured leg)")
    parser.add_argument("--runner", default="", help="the fleet's runner whose night this is (default: the one runner)")
    parser.set_defaults(handler=verdict)
    parser = gate.add_parser("accept-candidates", help="merge the night's candidates into baselines/ (accept PR)")
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--baselines", type=Path, default=Path("baselines"))
    parser.add_argument("--machine-file", type=Path, help="write the machine class(es) accepted here")
    parser.set_defaults(handler=accept_candidates)
    parser = gate.add_parser("watchdog", help="red when no gate night has completed for --hours")
    parser.add_argument("--gh", default="gh")
    parser.add_argument("--workflow", default="specdec-gate.yml")
    parser.add_argument("--hours", type=float, default=48.0)
    parser.set_defaults(handler=watchdog)
    parser = gate.add_parser("adopt-issues", help="once after upgrading: label and key the gate's older issues")
    parser.add_argument("--gh", default="gh")
    parser.set_defaults(handler=adopt_issues)
    parser = gate.add_parser(
        "init", help="legs for this machine's backends, servers and models, on this repository's profile and claims"
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true",
                      help="append them to ./pyproject.toml and write the gate's workflows and scripts under .github/")  # fmt: skip
    what.add_argument("--workflows", action="store_true",
                      help="only (re)write the gate's workflows and scripts from this pytest-specdec")  # fmt: skip
    parser.add_argument("--runner", choices=sorted(runner_kinds()), default="",
                        help="where the measuring jobs run (default: this machine's kind)")  # fmt: skip
    parser.set_defaults(handler=init)
    parser = gate.add_parser("resolve", help="a hashed lock for a runner's platform, resolved by pip (needs the index)")
    parser.add_argument("--platform", default=lock_platform(),
                        help="darwin-arm64-py3.12, linux-x86_64-py3.12 or this interpreter's (default)")  # fmt: skip
    parser.add_argument("--for", dest="what", choices=["measure", "alert"], default="measure",
                        help="measure: a runner's venv; alert: the hosted jobs' (.github/alert-lock.txt)")  # fmt: skip
    parser.add_argument("--specdec-wheel", type=Path, help="pin pytest-specdec by this wheel's hash (before PyPI)")
    parser.add_argument("--extras", default="all", help="pytest-specdec's extras in a measuring lock (default: all)")
    parser.add_argument("--find-links", type=Path, action="append", default=[],
                        help="resolve from this folder of wheels alone, offline (repeatable)")  # fmt: skip
    parser.add_argument("--out", type=Path, required=True, help="the lock file to write")
    parser.set_defaults(handler=resolve)
    parser = gate.add_parser("try", help="one night of this repository's gate here, under act, before pushing")
    parser.add_argument("--workflow", default="specdec-gate.yml", help="the workflow to run (specdec-accept.yml too)")
    parser.add_argument("--leg", default="all", help="one configured leg (default: all)")
    parser.add_argument("--runner", default="", help="one runner of a fleet, by its label (default: all)")
    parser.add_argument("--upgrade", action="store_true", help="upgrade the backends first, as a nightly run does")
    parser.add_argument("--install", action="store_true",
                        help="install from the locks as a runner does (default: this environment's packages)")  # fmt: skip
    parser.add_argument("--pytest-args", default="", help="extra pytest arguments, e.g. a shorter night")
    parser.set_defaults(handler=try_locally)
