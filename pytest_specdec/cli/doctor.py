"""``specdec doctor``: before a first run on a Mac, what is here and what to do, one line each.

The Python, the machine (chip, memory usable by the GPU, power source and thermal state),
then the backend you selected (``--backend``; else ``[tool.specdec] backend`` in
./pyproject.toml; else the plugin's default, mlx) and every other registered backend as
optional: installed or not, the releases its servers report, which profile's models are on
this machine and whether they fit, and what its own ``doctor`` hook adds (for Ollama, which
pulled tags can toggle SD and how to pair the others); then the disk space for models.

Only the selected backend decides the exit status: 0 when it can run (its runtime is
installed and, for a backend that talks to a server, the server answers), 1 when a line
starting with ``!`` says what to do first. The built-in embedded pair needs no download, so
the document's models are a note (for ``--specdec-profile=seed``), never an action.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

GB = 1e9
MODEL_ROOM_GB = 60.0  # the document's own models (Qwen2.5 7B + 0.5B, qwen3-coder:30b, a 35B GGUF)


def selected_backend(given: str | None) -> str:
    """``--backend``, else ``[tool.specdec] backend`` of ./pyproject.toml, else the plugin's default."""
    from pytest_specdec.config import all_options, read_pyproject

    if given:
        return given
    configured = read_pyproject(Path.cwd()).get("backend")
    default = next(option.default for option in all_options() if option.key == "backend")
    return str(configured or default)


def findings(selected: str) -> tuple[list[str], bool]:
    """Every finding, one line each (``!`` first where something must be done), and whether ``selected`` can run."""
    from pytest_specdec.backends import backend_spec, broken_backends, registered_backends
    from pytest_specdec.backends.base import load_attribute
    from pytest_specdec.gate.init import look
    from pytest_specdec.hardware import environment_fitness, machine_class, machine_profile

    spec = backend_spec(selected)  # an unknown name is one line naming the registered ones
    lines = []
    version = sys.version_info
    ready = version >= (3, 11)
    if not ready:
        lines.append(f"! python {version.major}.{version.minor} at {sys.executable} is too old — use 3.11 or newer "
                     "(brew install python@3.12, then python3.12)")  # fmt: skip
    else:
        lines.append(f"python {version.major}.{version.minor}.{version.micro} at {sys.executable}")
    profile = machine_profile()
    lines.append(
        f"machine {machine_class()}: {profile.chip}, {profile.memory_bytes / GB:.0f} GB, "
        f"{profile.usable_bytes / GB:.1f} GB usable by the models ({profile.usable_source})"
    )
    fitness = environment_fitness()
    details = ", ".join(f"{k}={v}" for k, v in fitness.details.items())
    lines.append(
        ("" if fitness.fit else "note: ") + f"environment: {fitness.reason}" + (f" ({details})" if details else "")
    )
    found = look(spec, profile.usable_bytes)
    if found.missing is not None:
        ready = False
        lines.append(
            f"! {selected} (selected): {found.comment.removeprefix(f'{selected}: ').removesuffix(' — no leg')}"
        )
    elif spec.server_releases and not found.releases:
        ready = False
        start = " ".join(spec.serve.command) if spec.serve else "the server"
        lines.append(f"! {selected} (selected): no server answered — start it ({start}) or pass its URL")
    else:
        real = (
            ""
            if found.profile
            else (
                "; the built-in embedded pair runs now (make bench); the document's own models are only for "
                "--specdec-profile=seed"
            )
        )
        lines.append(f"{selected} (selected): ready — {found.comment.removeprefix(f'{selected}: ')}{real}")
        if spec.doctor:
            lines += load_attribute(spec.doctor)()  # type: ignore[operator]
    for _, other in sorted(registered_backends().items()):  # every registered one, each saying what it lacks
        if other.name == selected:
            continue
        lines.append(f"optional: {look(other, profile.usable_bytes).comment}")
    lines += [f"broken: {line}" for line in broken_backends().values()]
    cache = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")).expanduser()
    existing = next((p for p in (cache, *cache.parents) if p.exists()), Path.home())
    free = shutil.disk_usage(existing).free / GB
    room = f"{free:.0f} GB free under {existing}"
    short = f" — the document's models need about {MODEL_ROOM_GB:.0f} GB" if free < MODEL_ROOM_GB else ""
    lines.append(f"disk: {room}{short}")
    return lines, ready


def doctor(args: argparse.Namespace) -> int:
    """Print the findings; exit 1 when the selected backend cannot run (a ``!`` line says what to do)."""
    lines, ready = findings(selected_backend(args.backend))
    for line in lines:
        print(line)
    return 0 if ready else 1


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``specdec doctor``."""
    parser = commands.add_parser("doctor", help="what is installed, what fits, and what to do before a first run")
    parser.add_argument("--backend", help="the backend to check (default: [tool.specdec] backend, else mlx)")
    parser.set_defaults(handler=doctor)
