"""What machine this is: a stable *machine class* for baselines, and its details.

The machine class keys baselines: ``Apple-M1-Max-64GB`` on a Mac (chip and
memory), ``NVIDIA-H200`` where an NVIDIA GPU is present, ``Linux-x86_64-cpu``
otherwise.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from functools import cache


def _run(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def machine_class() -> str:
    """The class of machine whose results are comparable with each other.

    ``SPECDEC_MACHINE_CLASS`` overrides the detection (e.g. to split one class of
    runners into finer groups).
    """
    override = os.environ.get("SPECDEC_MACHINE_CLASS", "").strip()
    return _slug(override) if override else _detected_machine_class()


@cache
def _detected_machine_class() -> str:
    system = platform.system()
    if system == "Darwin":
        chip = _run(["sysctl", "-n", "machdep.cpu.brand_string"]) or platform.machine()
        memory = _run(["sysctl", "-n", "hw.memsize"])
        gigabytes = f"-{round(int(memory) / 2**30)}GB" if memory.isdigit() else ""
        return _slug(chip) + gigabytes
    if shutil.which("nvidia-smi"):
        gpu = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines()
        if gpu:
            name = gpu[0].replace("NVIDIA", "").split("NVL")[0].split("PCIe")[0].split("SXM")[0]
            return "NVIDIA-" + _slug(name)
    return f"{system}-{platform.machine()}-cpu"


def nvidia_gpu_summary() -> str:
    """``NVIDIA H200 (143771 MiB)`` for the first GPU, or ``""`` without nvidia-smi."""
    if not shutil.which("nvidia-smi"):
        return ""
    rows = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]).splitlines()
    if not rows:
        return ""
    name, _, memory = rows[0].partition(",")
    return f"{name.strip()} ({memory.strip()} MiB)" if memory.strip() else name.strip()
