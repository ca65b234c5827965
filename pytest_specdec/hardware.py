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
    name, _, memory = (part.strip() for part in rows[0].partition(","))
    bandwidth = peak_bandwidth_gbs(name)
    shown = [f"{memory} MiB"] if memory else []
    shown += [f"{bandwidth:g} GB/s peak"] if bandwidth else []
    return f"{name} ({', '.join(shown)})" if shown else name


# Peak memory bandwidth in GB/s. Apple: spec figures (research note seed-systems.md §5);
# NVIDIA: datasheets. Keys are matched against the chip name, longest first.
PEAK_BANDWIDTH_GBS: dict[str, float] = {
    "Apple M1": 68.25,
    "Apple M1 Pro": 200.0,
    "Apple M1 Max": 400.0,
    "Apple M1 Ultra": 819.2,
    "Apple M2": 102.4,
    "Apple M2 Pro": 204.8,
    "Apple M2 Max": 400.0,
    "Apple M2 Ultra": 819.2,
    "Apple M3": 102.4,
    "Apple M3 Pro": 153.6,
    "Apple M3 Max": 400.0,  # 300 on the 14-core CPU / 30-core GPU part
    "Apple M3 Ultra": 819.2,
    "Apple M4": 120.0,
    "Apple M4 Pro": 273.0,
    "Apple M4 Max": 546.0,  # 410 on the 14-core CPU / 32-core GPU part
    "Apple M5": 153.0,
    "Apple M5 Pro": 307.0,
    "Apple M5 Max": 614.0,
    "NVIDIA H200": 4800.0,
    "NVIDIA H100 SXM": 3350.0,
    "NVIDIA H100 PCIe": 2000.0,
    "NVIDIA H100": 3350.0,
    "NVIDIA A100 80GB": 2039.0,
    "NVIDIA A100": 1555.0,
    "NVIDIA L40S": 864.0,
    "NVIDIA GeForce RTX 5090": 1792.0,
    "NVIDIA GeForce RTX 4090": 1008.0,
    "NVIDIA GeForce RTX 3090": 936.0,
}
# Lower-bandwidth variants of a chip, told apart by GPU core count.
BANDWIDTH_BY_GPU_CORES: dict[tuple[str, int], float] = {("Apple M3 Max", 30): 300.0, ("Apple M4 Max", 32): 410.0}


def peak_bandwidth_gbs(chip: str, gpu_cores: int | None = None) -> float | None:
    """The chip's peak memory bandwidth, or ``None`` for a chip not in the table."""
    normalized = " ".join(chip.replace("-", " ").split()).lower()
    for name in sorted(PEAK_BANDWIDTH_GBS, key=len, reverse=True):
        if normalized.startswith(name.lower()) or name.lower() in normalized:
            if gpu_cores is not None and (name, gpu_cores) in BANDWIDTH_BY_GPU_CORES:
                return BANDWIDTH_BY_GPU_CORES[(name, gpu_cores)]
            return PEAK_BANDWIDTH_GBS[name]
    return None
