"""``specdec doctor``: before a first run on a Mac, what is here and what to do, one line each.

The Python, each registered backend (installed or not, the releases its servers report,
which profile's models are on this machine and whether they fit, and what its own
``doctor`` hook adds: for Ollama, which pulled tags can toggle SD and how to pair the
others), the machine (chip,
memory usable by the GPU, power source and thermal state) and the disk space for models.
A line that needs action starts with ``!`` and says what to do.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

GB = 1e9
MODEL_ROOM_GB = 60.0  # the document's own models (Qwen2.5 7B + 0.5B, qwen3-coder:30b, a 35B GGUF)


def findings() -> list[str]:
    """Every finding, one line each (``!`` first where something must be done)."""
    from pytest_specdec.backends import registered_backends
    from pytest_specdec.backends.base import load_attribute
    from pytest_specdec.gate.init import PROFILES, look
    from pytest_specdec.hardware import environment_fitness, machine_class, machine_profile

    lines = []
    version = sys.version_info
    if version < (3, 11):
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
        ("" if fitness.fit else "! ") + f"environment: {fitness.reason}" + (f" ({details})" if details else "")
    )
    for _, spec in sorted(registered_backends().items()):
        if not any(kind in spec.pairs for kind in PROFILES):
            continue
        found = look(spec, profile.usable_bytes)
        needs = found.missing is not None or found.profile is None
        lines.append(("! " if needs else "") + found.comment)
        if spec.doctor and not needs:  # its server answers: what the backend itself can tell
            lines += load_attribute(spec.doctor)()  # type: ignore[operator]
    cache = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")).expanduser()
    existing = next((p for p in (cache, *cache.parents) if p.exists()), Path.home())
    free = shutil.disk_usage(existing).free / GB
    room = f"{free:.0f} GB free under {existing}"
    if free < MODEL_ROOM_GB:
        lines.append(f"! disk: {room} — the document's models need about {MODEL_ROOM_GB:.0f} GB; free some first")
    else:
        lines.append(f"disk: {room}")
    return lines


def doctor(args: argparse.Namespace) -> int:
    """Print the findings; exit 1 when one needs action."""
    lines = findings()
    for line in lines:
        print(line)
    return 1 if any(line.startswith("!") for line in lines) else 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``specdec doctor``."""
    parser = commands.add_parser("doctor", help="what is installed, what fits, and what to do before a first run")
    parser.set_defaults(handler=doctor)
