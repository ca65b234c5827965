"""``pytest-specdec doctor``: before a first run on a Mac, what is here and what to do, one line each.

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
import queue
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_specdec.hardware import MachineProfile

GB = 1e9
MODEL_ROOM_GB = 60.0  # the document's own models (Qwen2.5 7B + 0.5B, qwen3-coder:30b, a 35B GGUF)
DEADLINE_S = 300.0  # the whole check: every backend's look and the Ollama tags (22 requests of 10 s at most)


def selected_backend(given: str | None) -> str:
    """``--backend``, else ``[tool.specdec] backend`` of ./pyproject.toml, else the plugin's default."""
    from pytest_specdec.config import all_options, read_pyproject

    if given:
        return given
    configured = read_pyproject(Path.cwd()).get("backend")
    default = next(option.default for option in all_options() if option.key == "backend")
    return str(configured or default)


LOAD_READING_S = 1.0  # how long doctor watches the machine's CPU


def load_line(seconds: float) -> str:
    """``load: quiet …`` or ``note: load: busy …``: the machine's load read over ``seconds`` (this process idle)."""
    import time

    from pytest_specdec.machine_load import LoadProbe

    probe = LoadProbe()
    time.sleep(seconds)  # the reading's interval: other processes' CPU over it
    load = probe.finish()
    seen = (
        f"load average {load.load_after:.1f} on {load.cores} cores"
        if load.load_after is not None
        else "no load average"
    )
    others = f", other processes {load.others_cores:.2f} cores" if load.others_cores is not None else ""
    if load.busy:
        return f"note: load: busy ({load.busy}) — intervals will be wide; measure when the machine is otherwise idle"
    return f"load: quiet ({seen}{others}, over {seconds:.0f} s)"


def bandwidth_words(profile: MachineProfile) -> str:
    """``peak bandwidth 1228 GB/s (chips.toml: two M5 Max dies …)``, ``… measured``, or that the table lacks it."""
    from pytest_specdec.hardware import chip_spec

    if profile.bandwidth_gbs is None:
        return "peak bandwidth unknown (the chip is not in chips.toml: the roofline is left out)"
    if profile.bandwidth_source == "measured":
        return f"memory bandwidth {profile.bandwidth_gbs:.0f} GB/s (measured: a copy of 256 MiB)"
    spec = chip_spec(profile.chip, profile.gpu_cores)
    return f"peak bandwidth {profile.bandwidth_gbs:g} GB/s (chips.toml: {spec.source if spec else 'spec table'})"


def findings(selected: str) -> Iterator[tuple[str, bool]]:
    """Every finding as it is made, one line each (``!`` first where something must be done), with whether it
    keeps ``selected`` from running."""
    from pytest_specdec.backends import backend_spec, broken_backends, registered_backends
    from pytest_specdec.backends.base import load_attribute
    from pytest_specdec.gate.init import look
    from pytest_specdec.hardware import environment_fitness, machine_class, machine_profile

    spec = backend_spec(selected)  # an unknown name is one line naming the registered ones
    version = sys.version_info
    if version < (3, 11):
        yield (f"! python {version.major}.{version.minor} at {sys.executable} is too old — use 3.11 or newer "
               "(brew install python@3.12, then python3.12)", True)  # fmt: skip
    else:
        yield f"python {version.major}.{version.minor}.{version.micro} at {sys.executable}", False
    profile = machine_profile()
    yield (
        (
            f"machine {machine_class()}: {profile.chip}, {profile.memory_bytes / GB:.0f} GB, "
            f"{profile.usable_bytes / GB:.1f} GB usable by the models ({profile.usable_source}), "
            + bandwidth_words(profile)
        ),
        False,
    )
    fitness = environment_fitness()
    details = ", ".join(f"{k}={v}" for k, v in fitness.details.items())
    yield (
        ("" if fitness.fit else "note: ") + f"environment: {fitness.reason}" + (f" ({details})" if details else ""),
        (False),
    )
    yield load_line(LOAD_READING_S), False
    found = look(spec, profile.usable_bytes)
    if found.missing is not None:
        said = found.comment.removeprefix(f"{selected}: ").removesuffix(" — no leg")
        yield f"! {selected} (selected): {said}", True
    elif spec.server_releases and not found.releases:
        start = " ".join(spec.serve.command) if spec.serve else "the server"
        yield f"! {selected} (selected): no server answered — start it ({start}) or pass its URL", True
    else:
        real = (
            ""
            if found.profile
            else (
                "; the built-in embedded pair runs now (make bench); the document's own models are only for "
                "--specdec-profile=seed"
            )
        )
        yield f"{selected} (selected): ready — {found.comment.removeprefix(f'{selected}: ')}{real}", False
        if spec.doctor:
            for line in load_attribute(spec.doctor)():  # type: ignore[operator]
                yield line, False
    for _, other in sorted(registered_backends().items()):  # every registered one, each saying what it lacks
        if other.name != selected:
            yield f"optional: {look(other, profile.usable_bytes).comment}", False
    for line in broken_backends().values():
        yield f"broken: {line}", False
    cache = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")).expanduser()
    existing = next((p for p in (cache, *cache.parents) if p.exists()), Path.home())
    free = shutil.disk_usage(existing).free / GB
    short = f" — the document's models need about {MODEL_ROOM_GB:.0f} GB" if free < MODEL_ROOM_GB else ""
    yield f"disk: {free:.0f} GB free under {existing}{short}", False


def doctor(args: argparse.Namespace) -> int:
    """Print the findings as they come; exit 1 when the selected backend cannot run (a ``!`` line says what to do
    first) or when the whole check outlasts :data:`DEADLINE_S` (each server request has its own, shorter limit;
    this one holds whatever hangs where no request limit reaches)."""
    from pytest_specdec.backends import backend_spec

    selected = selected_backend(args.backend)
    backend_spec(selected)  # an unknown name: its one line before anything runs
    made: queue.Queue[tuple[str, bool] | BaseException | None] = queue.Queue()

    def check() -> None:
        try:
            for finding in findings(selected):
                made.put(finding)
        except BaseException as error:  # handed to the main thread, which says it as the CLI says any error
            made.put(error)
        made.put(None)

    threading.Thread(target=check, name="specdec-doctor", daemon=True).start()
    deadline, ready, last = time.monotonic() + DEADLINE_S, True, "the first check"
    while True:
        try:
            item = made.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            print(f"! doctor: no answer within {DEADLINE_S:g} s in all, after {last!r} — stopped; a server that "
                  "accepts connections but never answers is the usual cause (restart it, or check another "
                  "--backend)", flush=True)  # fmt: skip
            return 1
        if item is None:
            return 0 if ready else 1
        if isinstance(item, BaseException):
            raise item
        line, blocking = item
        print(line, flush=True)
        ready, last = ready and not blocking, line


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``pytest-specdec doctor``."""
    parser = commands.add_parser("doctor", help="what is installed, what fits, and what to do before a first run")
    parser.add_argument("--backend", help="the backend to check (default: [tool.specdec] backend, else mlx)")
    parser.set_defaults(handler=doctor)
