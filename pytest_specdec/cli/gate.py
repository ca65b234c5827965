"""``pytest-specdec gate STEP``: the steps of the CI gate, in the order the workflow runs them.

The measuring job of a leg: install → upgrade (when backends should move) → measure →
confirm → night → summary; ``lock`` after an accepting run. The alert job's ``verdict``
and the night's other commands are in :mod:`pytest_specdec.cli.gate_night`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import write_atomically

STEPS = ("install", "upgrade", "lock", "measure", "summary", "confirm")
BEFORE, AFTER, CHANGES = "versions-before.json", "versions-after.json", "release-changes.json"
KEEP_SERVERS = "SPECDEC_GATE_KEEP_SERVERS"  # "1": a local night (gate try) never runs upgrade-servers
UNLOCKABLE = "old-env.txt"  # why last night's environment could not be rebuilt tonight (read by confirm)


def _pip(python: str, *args: str) -> None:
    extra = shlex.split(os.environ.get("SPECDEC_GATE_PIP_ARGS", ""))
    command = [python, "-m", "pip", "install", "-q", *extra, *args]
    print("specdec gate: pip " + " ".join(command[3:]), flush=True)
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        said = [line.strip() for line in done.stderr.splitlines() if line.startswith("ERROR")]
        own = f": {said[0][:300]}" if said else ""
        raise SpecdecUsageError(f"pip install {' '.join(args)} failed (exit {done.returncode}){own}")


def _machine_class() -> str:
    from pytest_specdec.hardware import machine_class

    return machine_class()


def _versions(args: argparse.Namespace, packages: list[str], backend: str | None = None) -> dict[str, str]:
    """Versions as the leg's interpreter sees them (it may not be this one); ``backend=""``: every server's."""
    code = (
        "import json,sys; from pytest_specdec.gate.releases import collect_versions as c; "
        "print(json.dumps(c(sys.argv[2:], sys.argv[1])))"
    )
    done = subprocess.run(
        [args.python, "-c", code, args.backend if backend is None else backend, *packages],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SpecdecUsageError(f"{args.python} cannot report versions: {done.stderr.strip()[-300:]}")
    found = json.loads(done.stdout)
    return {str(k): str(v) for k, v in found.items()}


def install(args: argparse.Namespace) -> int:
    """Record the releases set-up installed from the hashed lock (``versions-before.json``); installs nothing.

    Set-up (``gate.sh setup``) installs the lock before the project can run; when it could not
    (``old-env.txt`` says why), tonight's releases were installed instead and last night's are the
    lock's. A leg package the lock does not pin is left to the upgrade step, the only one that
    resolves releases.
    """
    from pytest_specdec.gate import legs, lockfile, releases

    config = legs.read_gate_config(Path.cwd())
    packages = config.packages(args.backend)
    lock = args.lock or releases.lock_path(args.baselines, _machine_class())
    pins = lockfile.read_pins(lock)
    unlockable = (args.out / UNLOCKABLE).is_file()
    missing = [name for name in packages if name.lower() not in pins]
    said = (
        f"the lock could not be installed tonight ({args.out / UNLOCKABLE})"
        if unlockable
        else f"pinned by {lock} ({len(pins)} package(s), hashes checked)"
        if pins and not missing
        else f"{', '.join(missing)} not pinned by {lock}: tonight's upgrade step installs the newest (accept a run "
        "to pin them; a night without the upgrade cannot measure them)"
    )
    print(f"specdec gate: {args.backend}: {', '.join(packages) or 'no packages'} — {said}")
    # An earlier leg may have moved the servers tonight: this leg's "before" is their release before that.
    upgrade = releases.night_upgrade(releases.night_upgrade_path())
    before = _versions(args, packages)
    if unlockable:  # last night ran the lock's releases, whatever tonight installed in their place
        locked = {lockfile.pin_name(pin.name): pin.version for pin in pins.values()}
        before = {name: locked.get(lockfile.pin_name(name), v) for name, v in before.items()}
    releases.write_versions(args.out / BEFORE, releases.servers_before_tonight(before, upgrade))
    return 0


def upgrade(args: argparse.Namespace) -> int:
    """Move the leg's packages (and the configured servers) to their newest releases; record the change."""
    from pytest_specdec.gate import legs, releases

    config = legs.read_gate_config(Path.cwd())
    packages = config.packages(args.backend)
    before = releases.read_versions(args.out / BEFORE) or _versions(args, packages)
    if packages:  # eager: a library under the engine (MLX under mlx-vlm) moves too, though still satisfied
        _pip(args.python, "--upgrade", "--upgrade-strategy", "eager", *packages)
    if config.upgrade_servers and os.environ.get(KEEP_SERVERS) == "1":
        print("specdec gate: upgrade-servers not run (gate try without --upgrade leaves this machine's servers)")
    elif config.upgrade_servers:
        _upgrade_servers(args, config.upgrade_servers)
    after = _versions(args, packages)
    releases.write_versions(args.out / AFTER, after)
    changes = releases.release_changes(before, after)
    write_atomically(args.out / CHANGES, json.dumps(changes, indent=2) + "\n")
    for line in changes or ["no release changed"]:
        print(f"specdec gate: {line}")
    return 0


def _upgrade_servers(args: argparse.Namespace, command: str) -> None:
    """The runner owner's server upgrade, once a night (a later leg finds it recorded); a failure fails the leg."""
    from pytest_specdec.gate import releases
    from pytest_specdec.gate.runner_state import dump_state_json

    record = releases.night_upgrade_path()
    earlier = releases.night_upgrade(record)
    if earlier is None:
        before = _versions(args, [], backend="") if record is not None else {}
        if record is not None:
            releases.forget_other_nights(record)
            dump_state_json(record, {"before": before, "exit": None})
        print(f"specdec gate: {command}", flush=True)
        code = subprocess.run(command, shell=True, check=False).returncode  # the runner owner's own command
        if record is not None:
            dump_state_json(record, {"before": before, "exit": code})
    else:
        said = earlier.get("exit")
        code = said if isinstance(said, int) else -1  # never finished: the job was killed while it ran
        print("specdec gate: the servers were upgraded tonight by an earlier leg (their releases before it are "
              "this leg's before)")  # fmt: skip
    if code != 0:
        ended = "did not finish (an earlier leg's job ended while it ran)" if code == -1 else f"exited {code}"
        reason = (
            f"the server upgrade '{command}' {ended}: tonight would measure last night's servers — fix "
            "upgrade-servers in [tool.specdec.gate] or the runner"
        )
        from pytest_specdec.gate import legs, runs
        from pytest_specdec.gate.findings import LegCause

        leg = legs.read_gate_config(Path.cwd()).leg(args.backend)
        runs.write_leg(runs.unmeasurable_leg(leg, reason, LegCause.SERVER_UPGRADE), args.out)
        raise SpecdecUsageError(reason)


def lock(args: argparse.Namespace) -> int:
    """Write the environment that ran, every package with its hash, to ``OUT/gate-lock.txt`` (for the accept PR)."""
    from pytest_specdec.gate import lockfile
    from pytest_specdec.hardware import machine_class

    platform = lockfile.interpreter_platform(args.python)
    # What set-up installed by hash, kept as it ran: this machine class's own lock, else (a first lock) those of
    # another class for the platform, one of which set-up took (lock_for_here.py).
    own = args.baselines / machine_class() / "gate-lock.txt"
    installed = (
        lockfile.read_pins(own)
        if lockfile.platform_of(own) in (platform, "") and own.is_file()
        else lockfile.platform_pins(args.baselines, platform)
    )
    pins = lockfile.environment_pins(args.python, os.environ.get("SPECDEC_GATE_PIP_ARGS", ""), installed)
    pins = lockfile.mark_build(pins, args.baselines, platform)  # the '# build' marks of this platform's locks
    lockfile.write_pins(args.out / "gate-lock.txt", pins, platform)
    print(f"specdec gate: locked {len(pins)} package(s) with their hashes in {args.out / 'gate-lock.txt'}")
    return 0


def measure(args: argparse.Namespace) -> int:
    """Run the leg; what it means for the night is decided by ``night`` (and ``verdict``), not here."""
    from pytest_specdec.gate import legs, runs

    config = legs.read_gate_config(Path.cwd())
    leg = runs.measure(config, args.backend, args.out, args.python, shlex.split(args.pytest_args))
    runs.write_leg(leg, args.out)
    print(f"specdec gate: {args.backend}: {leg.reason}")
    if leg.fails_gate:
        print(f"specdec gate: FAIL — the required {args.backend} leg cannot be measured: {leg.reason}")
    elif leg.broken:
        print(f"specdec gate: FAIL — {args.backend}: {leg.broken}")
    elif not leg.measurable:
        print(f"::warning title=specdec gate ({args.backend})::optional leg {leg.reason}")
    return 0


def summary(args: argparse.Namespace) -> int:
    from pytest_specdec.gate import legs, runs
    from pytest_specdec.gate.findings import NIGHT_FILE
    from pytest_specdec.gate.leg_account import read_night
    from pytest_specdec.gate.step_summary import leg_summary

    config = legs.read_gate_config(Path.cwd()).leg(args.backend)
    status = runs.read_leg(args.out) or runs.Leg(args.backend, False, "the measure step did not run")
    status = replace(status, required=config.required)
    findings: list[str] = []
    if (args.out / NIGHT_FILE).is_file():
        night = read_night(args.out / NIGHT_FILE)
        findings = [f"**{f.state.value}** — {f.subject}: {f.message}" for f in night.findings]
        findings += [f"budget: {night.budget}"] if night.budget else []
    print(leg_summary(args.backend, args.out, args.baselines, _machine_class(), status, findings=findings), end="")
    return 0


def confirm(args: argparse.Namespace) -> int:
    """Re-run the flipped comparisons once: only a flip that repeats is confirmed (a measured leg only)."""
    from pytest_specdec.gate import legs, runs

    status = runs.read_leg(args.out)
    if status is None or not status.measurable:
        print(
            f"specdec gate: {args.backend}: {status.reason if status else 'nothing was measured'} — nothing to confirm"
        )
        return 0
    config = legs.read_gate_config(Path.cwd())
    confirmed = runs.confirm(
        config, args.out / "results.json", args.out / "confirm", args.python, shlex.split(args.pytest_args)
    )
    print(f"specdec gate: {len(confirmed)} flipped conclusion(s) confirmed")
    return 0


HANDLERS = {
    "install": install, "upgrade": upgrade, "lock": lock, "measure": measure, "summary": summary, "confirm": confirm,
}  # fmt: skip


def step(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    return HANDLERS[args.step](args)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``pytest-specdec gate STEP``: a leg's steps (``--backend``, ``--out``), then the night's (:mod:`.gate_night`)."""
    from pytest_specdec.cli import gate_night

    leg = argparse.ArgumentParser(add_help=False)
    leg.add_argument("--backend", required=True)
    leg.add_argument("--out", type=Path, required=True, help="folder for this backend's reports")
    leg.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    leg.add_argument("--gh", default="gh", help="the GitHub CLI to call")
    leg.add_argument("--baselines", type=Path, default=Path("baselines"), help="the baselines folder")
    leg.add_argument("--lock", type=Path, help="install: the hashed lock set-up installed (lock_for_here.py's)")
    leg.add_argument(
        "--pytest-args",
        default=os.environ.get("SPECDEC_GATE_PYTEST_ARGS", ""),
        help="extra pytest arguments, one string",
    )
    parser = commands.add_parser("gate", help="steps of the CI gate (see .github/workflows/specdec-gate.yml)")
    steps = parser.add_subparsers(dest="step", required=True)
    for name in STEPS:
        steps.add_parser(name, parents=[leg], help=f"the leg's {name} step").set_defaults(handler=step)
    gate_night.register(steps, leg)
