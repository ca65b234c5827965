"""``pytest-specdec gate init``: ``[tool.specdec.gate]`` legs for the machine it runs on.

For every registered backend it looks at what is here, and says it in a comment above
the leg: whether the runtime is installed, the releases its servers report, which of
the backend's model profiles has its models on this machine (a file, a package, a Hugging
Face cache folder, a pulled Ollama tag) and whether the pair fits the usable memory. A
backend with a profile whose models are here and fit gets a required leg; one whose
server answers but whose models are unknown gets an optional leg; the rest are
comments saying what is missing.

It writes the gate of the repository it runs in: where ``[tool.specdec]`` names a
``profile``, the legs are on that profile (its own ``[tool.specdec.profiles.NAME]`` tables),
never on the shipped ones, and each leg's ``targets`` are the test files of that repository
that ask for the ``specdec`` fixture (``benchmarks/``, the default, where the repository has
such a folder, as this one does).
"""

from __future__ import annotations

import ast
import json
import os
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from pytest_specdec.backends import distribution_versions, missing_runtime, registered_backends, server_releases
from pytest_specdec.backends.base import BackendSpec, ModelPair, load_attribute
from pytest_specdec.config import profile_pair, read_pyproject
from pytest_specdec.embedded.models import is_embedded
from pytest_specdec.embedded.packaged import package_model_bytes
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.legs import DEFAULT_RUNS_ON, DEFAULT_TARGETS
from pytest_specdec.hardware import machine_class, machine_profile
from pytest_specdec.store.files import write_atomically

SERVER_MODEL = "server-model"  # a pair whose model is whatever the server serves
PROFILES = ("seed", "gemma")  # real models, best first; the synthetic pairs never gate a runner
GB = 1e9


def _hub_folder(reference: str) -> Path:
    home = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")
    return home.expanduser() / ("models--" + reference.replace("/", "--"))


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file() and not item.is_symlink())


def model_bytes(reference: str, present: Sequence[str], serving: bool) -> int | None:
    """Bytes of a model reference found on this machine; ``None`` when it is not here.

    ``present``: the models the backend itself lists as here (its spec's ``local_models``,
    e.g. pulled tags); ``serving``: a server of the backend answered, so the model it serves
    (``server-model``) is there.
    """
    base = reference.split("#", 1)[0]
    if base == SERVER_MODEL:
        return 0 if serving else None
    if is_embedded(base):
        return None  # synthetic: never a gate's model
    if base.startswith("pypi:"):
        return package_model_bytes(base.removeprefix("pypi:"))
    path = Path(base).expanduser()
    if base.startswith(("/", "~", ".")) or base.endswith(".gguf"):
        return _size(path) if path.exists() else None
    if base in present:
        return 0  # listed by the backend (a pulled tag): its size is the server's business
    folder = _hub_folder(base)
    return _size(folder / "blobs") if folder.is_dir() else None


@dataclass(frozen=True)
class Found:
    """What one backend has on this machine."""

    spec: BackendSpec
    missing: str | None
    releases: dict[str, str]
    profile: str | None
    comment: str


def what_it_does(spec: BackendSpec) -> str:
    """``SD kinds: draft model, n-gram lookup (runs claims c, d)``, or what it lacks for the claims about a kind."""
    from pytest_specdec.seed.document import claims_run_by

    runs = claims_run_by(spec.evidence_family, spec.kinds)
    claims = f" (runs claim{'s' if len(runs) > 1 else ''} {', '.join(runs)})" if runs else ""
    if not spec.kinds:
        return f"declares no SD kind (BackendSpec.kinds), so claims about a kind of SD skip it{claims}"
    return "SD kinds: " + ", ".join(spec.kinds) + claims


def look(
    spec: BackendSpec, usable: float, profiles: Sequence[str] = (), pyproject: Mapping[str, object] | None = None
) -> Found:
    """The backend's runtime, servers and the first of ``profiles`` (default: the shipped real ones) whose models are
    here and fit, and what it does; ``pyproject``: the repository's ``[tool.specdec]``, whose profiles win."""
    found = _look(spec, usable, _pairs(spec, profiles or PROFILES, pyproject or {}), own=", ".join(profiles))
    return replace(found, comment=f"{found.comment}; {what_it_does(spec)}")


def _pairs(spec: BackendSpec, profiles: Sequence[str], pyproject: Mapping[str, object]) -> dict[str, ModelPair]:
    """Each profile's pair for the backend, where the profile has one (a repository's own tables first)."""
    pairs = {}
    for profile in profiles:
        try:
            pairs[profile] = profile_pair(profile, spec.name, pyproject)
        except SpecdecUsageError:
            continue  # no models for this backend: said by the caller when no profile has any
    return pairs


def _look(spec: BackendSpec, usable: float, pairs: Mapping[str, ModelPair], own: str) -> Found:
    missing = missing_runtime(spec)
    if missing is not None:
        fix = f"pip install 'pytest-specdec[{spec.extra}]'" if spec.extra else f"install {missing}"
        return Found(spec, missing, {}, None, f"{spec.name}: not installed ({missing!r} missing: {fix}) — no leg")
    releases = server_releases(spec.name)
    present: list[str] = list(load_attribute(spec.local_models)()) if spec.local_models else []  # type: ignore[operator]
    said = ", ".join(f"{k} {v}" for k, v in releases.items()) or (
        "no server found"
        if spec.server_releases
        else "in-process: " + ", ".join(f"{k} {v}" for k, v in distribution_versions(spec).items())
    )
    for profile, pair in pairs.items():
        files = dict.fromkeys(m.split("#", 1)[0] for m in (pair.target, pair.draft) if m)  # an early exit: one file
        sizes = [model_bytes(m, present, bool(releases)) for m in files]
        if any(size is None for size in sizes):
            continue
        needed = sum(size or 0 for size in sizes)
        if needed and needed > usable:
            return Found(spec, None, releases, None, f"{spec.name}: {said}; profile {profile!r} is here but "
                         f"needs {needed / GB:.1f} GB > {usable / GB:.1f} GB usable — no leg")  # fmt: skip
        fit = f"{needed / GB:.2f} GB fits {usable / GB:.1f} GB usable" if needed else "size reported by the server"
        return Found(spec, None, releases, profile, f"{spec.name}: {said}; profile {profile!r}: {pair.target}"
                     + (f" + {pair.draft}" if pair.draft else "") + f" found, {fit}")  # fmt: skip
    if not pairs and own:
        return Found(spec, None, releases, None, f"{spec.name}: {said}; this repository's profile {own!r} has no "
                     f"models for it ([tool.specdec.profiles.{own}.{spec.name}]) — no leg")  # fmt: skip
    if not pairs:
        return Found(spec, None, releases, None, f"{spec.name}: {said}; it declares only synthetic or served pairs "
                     f"({', '.join(spec.pairs) or 'none'}), no real model profile ({' or '.join(PROFILES)}) — no leg: "
                     "add [tool.specdec.profiles.NAME] with your models")  # fmt: skip
    wanted = ", ".join(f"{p}: {pair.target}" for p, pair in pairs.items())
    return Found(spec, None, releases, None, f"{spec.name}: {said}; no profile's models found here ({wanted}) — "
                 "pull them, or add [tool.specdec.profiles.NAME] with yours")  # fmt: skip


NO_LEG = (
    "no leg: no installed backend has a model profile's models here (each backend's line above says what is "
    "missing) — pull a profile's models (pytest-specdec doctor --backend NAME says which), or add "
    "[tool.specdec.profiles.NAME] with your own, then run pytest-specdec gate init again"
)


TEST_FILE = re.compile(r"^test_.*\.py$|.*_test\.py$")  # pytest's default python_files
SKIPPED_FOLDERS = frozenset({"node_modules", "venv", "site-packages", "__pycache__", "build", "dist"})


def _asks_for_specdec(path: Path) -> bool:
    """Whether a test file has a test function that takes the ``specdec`` fixture, or takes the shipped claims
    from ``pytest_specdec.benchmarks`` (parsed, never imported)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):  # not Python, or not readable (a dangling link): not a claim file
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            if any(arg.arg == "specdec" for arg in node.args.args):
                return True
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_specdec.benchmarks"):
            return True
    return False


def claim_targets(root: Path) -> tuple[str, ...]:
    """The repository's claims as a leg's ``targets``: ``benchmarks/`` where that folder holds one (the default, this
    project's layout), else each test file that asks for the ``specdec`` fixture; ``()``: none.

    >>> claim_targets(Path("/nonexistent"))
    ()
    """
    shipped = root / "benchmarks"
    if shipped.is_dir() and any(_asks_for_specdec(path) for path in shipped.glob("*.py") if TEST_FILE.match(path.name)):
        return DEFAULT_TARGETS
    found: list[str] = []
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if not f.startswith(".") and f not in SKIPPED_FOLDERS)
        tests = (name for name in sorted(files) if name.endswith(".py") and TEST_FILE.match(name))
        found += [(Path(folder) / name).relative_to(root).as_posix() for name in tests
                  if _asks_for_specdec(Path(folder) / name)]  # fmt: skip
    return tuple(found)


@dataclass(frozen=True)
class RunnerKind:
    """Where the measuring jobs run: the labels they ask for, and what the gate reads there (a comment above
    ``runs-on`` in the table init writes)."""

    labels: tuple[str, ...]
    checks: str


def runner_kinds() -> dict[str, RunnerKind]:
    """The runners ``gate init --runner`` knows, by name; a Linux runner's architecture label is this machine's."""
    arch = "ARM64" if platform.machine().lower() in ("arm64", "aarch64") else "X64"
    return {
        "self-hosted-mac": RunnerKind(DEFAULT_RUNS_ON, "a Mac of yours: before each comparison the plugin reads "
                                      "pmset (on battery, Low Power Mode or throttled: not measured) and the load of "
                                      "other processes (a busy machine is said)"),
        "self-hosted-linux": RunnerKind(("self-hosted", "Linux", arch), "a Linux machine of yours: no power or "
                                        "thermal reading (pmset is macOS's); the load of other processes is read "
                                        "before each comparison and a busy machine is said"),
        "hosted": RunnerKind(("macos-14",), "GitHub's hosted macOS arm64: a virtual machine shared with others, "
                             "fresh each night, no GPU of its own (Metal, where there, is paravirtual: ci.yml's bench job says which), only what pip installs (no Ollama "
                             "or LM Studio app); its neighbours' noise widens the intervals, so more nights read "
                             "inconclusive, while a wrong verdict stays as rare as the design's 98 % intervals make "
                             "it; its machine class is the virtual machine's, never a chip's"),
    }  # fmt: skip


def default_runner() -> str:
    """``self-hosted-mac`` on a Mac, else ``self-hosted-linux``: init runs on the runner it configures."""
    return "self-hosted-mac" if platform.system() == "Darwin" else "self-hosted-linux"


def lock_steps(root: Path, runner: str) -> list[str]:
    """What to run next for each hashed lock the repository lacks: the hosted jobs' (without it their set-up
    fails) and the runner's (without it the first night installs by name, and its accept pull request locks it).
    """
    from pytest_specdec.hardware import lock_platform, machine_class

    measure = lock_platform() if (runner or default_runner()) == "self-hosted-linux" else "darwin-arm64-py3.12"
    runner_lock = Path("baselines") / machine_class() / "gate-lock.txt"
    wheel = "--specdec-wheel WHEEL "  # until pytest-specdec is on PyPI (the guide's step 3)
    steps = []
    if not (root / ".github" / "alert-lock.txt").is_file():
        steps.append(f"next: .github/alert-lock.txt (the hosted jobs' hashed lock) is missing: pytest-specdec gate "
                     f"resolve --for alert --platform linux-x86_64-py3.12 {wheel}--out .github/alert-lock.txt")  # fmt: skip
    if not (root / runner_lock).is_file():
        steps.append(f"next: {runner_lock} (the runner's hashed lock) is missing — the first night installs by name "
                     f"unless you write it: pytest-specdec gate resolve --for measure --platform {measure} {wheel}"
                     f"--out {runner_lock}")  # fmt: skip
    return steps


NO_TARGETS = (
    "no leg: no test file here asks for the specdec fixture — write a claim (docs/writing-claims.md), then run "
    "pytest-specdec gate init again"
)


def gate_table(root: Path | None = None, runner: str = "") -> tuple[str, int]:
    """The ``[tool.specdec.gate]`` text for this machine, the repository at ``root`` (default: here) and the kind of
    ``runner`` (default: this machine's, :func:`runner_kinds`), a comment above each leg, and how many legs it has."""
    import shutil

    from pytest_specdec.backends.homebrew import UPGRADE_SERVERS

    root = Path.cwd() if root is None else root
    pyproject = read_pyproject(root)
    own = pyproject.get("profile")
    profiles = (str(own),) if own else ()
    targets = claim_targets(root)
    usable = machine_profile().usable_bytes
    found = [look(spec, usable, profiles, pyproject) for _, spec in sorted(registered_backends().items())]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    kind = runner or default_runner()
    where = runner_kinds()[kind]
    lines = [
        f"# written by `pytest-specdec gate init --runner {kind}` on {machine_class()}, {stamp}",
        "[tool.specdec.gate]",
        f"# the measuring jobs' runner, {kind}: {where.checks}",
        f"runs-on = {json.dumps(list(where.labels))}",
        "window-minutes = 300  # a night's time on the runner; claims beyond it are dropped, and said so",
        "ungated-nights = 3  # nights results may wait for acceptance before the night is red",
        "undecided-nights = 3  # nights a claim may stay undecided before an issue opens",
        "# how server releases enter: Homebrew's ollama and llama.cpp to their newest, last night's keg kept for the "
        "same-night A/B",
        (
            "# (hosted: no server app is measured there) "
            if kind == "hosted"
            else ""
            if shutil.which("brew")
            else "# (no Homebrew here) "
        )
        + f'upgrade-servers = "{UPGRADE_SERVERS}"',
    ]
    legs = 0
    for item in found:  # each backend's line, what it lacks said, even where no claim asks for a leg
        lines += ["", f"# {item.comment}"]
        if item.profile is None or not targets:
            continue
        if kind == "hosted" and item.spec.serve is not None:
            lines.append(f"# (hosted: no {item.spec.name} leg — its server is an app the hosted runner does not have)")
            continue
        legs += 1
        lines += [f"[tool.specdec.gate.legs.{item.spec.name}]", "required = true", f'profile = "{item.profile}"']
        if targets != DEFAULT_TARGETS:
            lines.append(f"targets = {json.dumps(list(targets))}  # the test files here that ask for specdec")
        if item.spec.serve is not None and not any("running" in label for label in item.releases):
            lines.append("serve = true  # no running server answered: the gate starts one")
    if not legs:
        lines += ["", f"# {NO_TARGETS if not targets else NO_LEG}"]
    return "\n".join(lines) + "\n", legs


def append_to_pyproject(path: Path, text: str) -> str:
    """Append the table to ``path``, parsed before and after, written atomically; otherwise one line and the file
    as it was: not UTF-8, not valid TOML, a ``[tool.specdec.gate]`` already there (in any TOML spelling), an
    append that would not parse, or a disk that cannot hold it."""
    import tomllib

    raw = path.read_bytes() if path.is_file() else b""
    keep = "nothing was written; print the legs with 'pytest-specdec gate init' and add them by hand"
    try:
        current = raw.decode("utf-8")
        found: object = tomllib.loads(current)
        for name in ("tool", "specdec", "gate"):
            found = found.get(name) if isinstance(found, dict) else None
        if found is not None:
            raise SpecdecUsageError(
                f"{path} already has [tool.specdec.gate] — remove that table first, or print the legs with "
                "'pytest-specdec gate init' and merge them by hand"
            )
    except UnicodeDecodeError as error:
        raise SpecdecUsageError(f"{path} is not UTF-8 (byte {error.start}) — {keep}") from None
    except tomllib.TOMLDecodeError as error:
        raise SpecdecUsageError(f"{path} is not valid TOML ({error}) — fix it first; {keep}") from None
    updated = current + ("\n" if current and not current.endswith("\n") else "") + "\n" + text
    try:
        tomllib.loads(updated)
    except tomllib.TOMLDecodeError as error:
        raise SpecdecUsageError(f"appending the legs would leave {path} invalid TOML ({error}) — {keep}") from None
    try:
        write_atomically(path, updated)
    except OSError as error:
        raise SpecdecUsageError(f"could not write {path}: {error.strerror or error} — the file is as it was") from None
    return f"appended [tool.specdec.gate] legs for this machine to {path}"
