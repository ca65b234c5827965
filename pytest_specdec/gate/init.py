"""``pytest-specdec gate init``: ``[tool.specdec.gate]`` legs for the machine it runs on.

For every registered backend it looks at what is here, and says it in a comment above
the leg: whether the runtime is installed, the releases its servers report, which of
the backend's model profiles has its models on this machine (a file, a package, a Hugging
Face cache folder, a pulled Ollama tag) and whether the pair fits the usable memory. A
backend with a profile whose models are here and fit gets a required leg; one whose
server answers but whose models are unknown gets an optional leg; the rest are
comments saying what is missing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from pytest_specdec.backends import distribution_versions, missing_runtime, registered_backends, server_releases
from pytest_specdec.backends.base import BackendSpec, ModelPair, load_attribute
from pytest_specdec.embedded.models import is_embedded
from pytest_specdec.embedded.packaged import package_model_bytes
from pytest_specdec.errors import SpecdecUsageError
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


def look(spec: BackendSpec, usable: float) -> Found:
    """The backend's runtime, servers and the first profile whose models are here and fit, and what it does."""
    found = _look(spec, usable)
    return replace(found, comment=f"{found.comment}; {what_it_does(spec)}")


def _look(spec: BackendSpec, usable: float) -> Found:
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
    for profile in PROFILES:
        pair: ModelPair | None = spec.pairs.get(profile)
        if pair is None:
            continue
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
    if not any(p in spec.pairs for p in PROFILES):
        return Found(spec, None, releases, None, f"{spec.name}: {said}; it declares only synthetic or served pairs "
                     f"({', '.join(spec.pairs) or 'none'}), no real model profile ({' or '.join(PROFILES)}) — no leg: "
                     "add [tool.specdec.profiles.NAME] with your models")  # fmt: skip
    wanted = ", ".join(f"{p}: {spec.pairs[p].target}" for p in PROFILES if p in spec.pairs)
    return Found(spec, None, releases, None, f"{spec.name}: {said}; no profile's models found here ({wanted}) — "
                 "pull them, or add [tool.specdec.profiles.NAME] with yours")  # fmt: skip


NO_LEG = (
    "no leg: no installed backend has a model profile's models here (each backend's line above says what is "
    "missing) — pull a profile's models (pytest-specdec doctor --backend NAME says which), or add "
    "[tool.specdec.profiles.NAME] with your own, then run pytest-specdec gate init again"
)


def gate_table() -> tuple[str, int]:
    """The ``[tool.specdec.gate]`` text for this machine, a comment above each leg, and how many legs it has."""
    import shutil

    from pytest_specdec.backends.homebrew import UPGRADE_SERVERS

    usable = machine_profile().usable_bytes
    found = [look(spec, usable) for _, spec in sorted(registered_backends().items())]  # each says what it lacks
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    lines = [
        f"# written by `pytest-specdec gate init` on {machine_class()}, {stamp}",
        "[tool.specdec.gate]",
        "window-minutes = 300  # a night's time on the runner; claims beyond it are dropped, and said so",
        "ungated-nights = 3  # nights results may wait for acceptance before the night is red",
        "undecided-nights = 3  # nights a claim may stay undecided before an issue opens",
        "# how server releases enter: Homebrew's ollama and llama.cpp to their newest, last night's keg kept for the "
        "same-night A/B",
        ("" if shutil.which("brew") else "# (no Homebrew here) ") + f'upgrade-servers = "{UPGRADE_SERVERS}"',
    ]
    legs = 0
    for item in found:
        lines += ["", f"# {item.comment}"]
        if item.profile is None:
            continue
        legs += 1
        lines += [f"[tool.specdec.gate.legs.{item.spec.name}]", "required = true", f'profile = "{item.profile}"']
        if item.spec.serve is not None and not any("running" in label for label in item.releases):
            lines.append("serve = true  # no running server answered: the gate starts one")
    if not legs:
        lines += ["", f"# {NO_LEG}"]
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
