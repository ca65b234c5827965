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
from dataclasses import dataclass
from functools import cache


def _run(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def lock_platform() -> str:
    """``darwin-arm64-py3.12``: the platform a hashed lock is resolved for (its ``# platform:`` line)."""
    import sys

    machine = {"aarch64": "arm64", "AMD64": "x86_64"}.get(platform.machine(), platform.machine())
    return f"{sys.platform}-{machine}-py{sys.version_info[0]}.{sys.version_info[1]}"


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


@dataclass(frozen=True)
class Cores:
    """How many CPU threads a backend is given by default, and what that count is."""

    count: int
    source: str


def usable_cores() -> Cores:
    """The cores this process may use, as a user's own run would get them.

    Apple silicon: its performance cores (``sysctl hw.perflevel0.physicalcpu``; the efficiency
    cores slow a decode step down). Elsewhere: the cores this process may run on
    (``os.sched_getaffinity``, which ``taskset`` and container limits narrow), else every core.
    """
    if platform.system() == "Darwin":
        performance = _run(["sysctl", "-n", "hw.perflevel0.physicalcpu"]).strip()
        if performance.isdigit() and int(performance) > 0:
            return Cores(int(performance), "performance cores (sysctl hw.perflevel0.physicalcpu)")
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return Cores(len(affinity(0)), "cores this process may run on (sched_getaffinity)")
    return Cores(os.cpu_count() or 1, "every core (os.cpu_count)")


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


@dataclass(frozen=True)
class ChipSpec:
    """One row of ``chips.toml``: a chip (a binned part: its GPU core count) and its peak bandwidth's source."""

    name: str
    bandwidth_gbs: float
    source: str
    gpu_cores: int | None = None


@cache
def chip_table() -> tuple[ChipSpec, ...]:
    """Every row of ``chips.toml``, read on first use (this module is also loaded by path before the package is
    installed, by the gate's lock chooser, which needs only the machine class)."""
    import tomllib
    from importlib.resources import files

    rows = tomllib.loads(files("pytest_specdec").joinpath("chips.toml").read_text(encoding="utf-8"))["chip"]
    return tuple(ChipSpec(r["name"], float(r["bandwidth_gbs"]), r["source"], r.get("gpu_cores")) for r in rows)


@cache
def peak_bandwidths() -> dict[str, float]:
    """Peak GB/s by chip name: the part a chip's name alone means (a binned part is its own row, with its GPU cores)."""
    return {c.name: c.bandwidth_gbs for c in chip_table() if c.gpu_cores is None}


APPLE_CHIP = re.compile(r"\bapple (m\d+)(?: (pro|max|ultra))?\b")


def chip_spec(chip: str, gpu_cores: int | None = None) -> ChipSpec | None:
    """The table's row for ``chip`` (its binned part where ``gpu_cores`` tells one), or ``None`` for a chip not in it.

    An Apple chip matches its own generation and tier only ("Apple M5 Ultra" is never "Apple M5"); another
    vendor's name matches the longest table name it contains ("NVIDIA H100 80GB HBM3" is "NVIDIA H100").

    >>> chip_spec("Apple M5 Ultra").bandwidth_gbs, chip_spec("Apple M5 Max", 32).bandwidth_gbs
    (1228.0, 460.0)
    >>> chip_spec("Apple M7 Max") is None
    True
    """
    normalized = " ".join(chip.replace("-", " ").split()).lower()
    apple = APPLE_CHIP.search(normalized)
    if apple:
        generation, tier = apple.groups()
        wanted = f"Apple {generation.upper()}" + (f" {tier.capitalize()}" if tier else "")
        names = [wanted] if wanted in peak_bandwidths() else []
    else:
        names = [n for n in sorted(peak_bandwidths(), key=len, reverse=True) if n.lower() in normalized][:1]
    if not names:
        return None
    rows = [c for c in chip_table() if c.name == names[0]]
    return next((c for c in rows if c.gpu_cores == gpu_cores and gpu_cores is not None), None) or next(
        c for c in rows if c.gpu_cores is None
    )


def peak_bandwidth_gbs(chip: str, gpu_cores: int | None = None) -> float | None:
    """The chip's peak memory bandwidth, or ``None`` for a chip not in the table (:func:`chip_spec`)."""
    found = chip_spec(chip, gpu_cores)
    return found.bandwidth_gbs if found else None


@dataclass(frozen=True)
class MachineProfile:
    """The numbers the roofline and memory-fit checks need, each with where it came from."""

    chip: str
    memory_bytes: float
    bandwidth_gbs: float | None
    bandwidth_source: str  # "spec table", "measured", "unknown"
    usable_bytes: float
    usable_source: str
    gpu_cores: int | None = None


def _sysctl(name: str) -> str:
    return _run(["sysctl", "-n", name])


def _gpu_cores_mac() -> int | None:
    match = re.search(r'"gpu-core-count"\s*=\s*(\d+)', _run(["ioreg", "-rc", "AGXAccelerator"]))
    return int(match.group(1)) if match else None


def _mac_profile() -> MachineProfile:
    chip = _sysctl("machdep.cpu.brand_string") or platform.machine()
    memory = float(_sysctl("hw.memsize") or 0)
    cores = _gpu_cores_mac()
    wired = _sysctl("iogpu.wired_limit_mb")
    if wired.isdigit() and int(wired) > 0:
        usable, source = float(int(wired) * 2**20), "iogpu.wired_limit_mb"
    else:
        usable, source = 0.75 * memory, "about 75 % of RAM (macOS default GPU working set)"
    bandwidth = peak_bandwidth_gbs(chip, cores)
    return MachineProfile(chip, memory, bandwidth, "spec table" if bandwidth else "unknown", usable, source, cores)


def _meminfo(key: str) -> float:
    try:
        text = open("/proc/meminfo", encoding="ascii").read()  # noqa: SIM115 - tiny procfs file
    except OSError:
        return 0.0
    match = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
    return float(match.group(1)) * 1024 if match else 0.0


def measured_bandwidth_gbs(size_bytes: int = 256 * 2**20, repeats: int = 5) -> float:
    """Copy bandwidth of this machine's RAM (bytes read + written per second), best of ``repeats``."""
    import time

    import numpy as np

    source = np.ones(size_bytes // 8, dtype=np.float64)
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best / 1e9


@cache
def machine_profile() -> MachineProfile:
    """This machine: chip, memory, peak (or measured) bandwidth, usable working set."""
    if platform.system() == "Darwin":
        return _mac_profile()
    gpu = nvidia_gpu_summary()
    if gpu:
        name = gpu.split(" (")[0]
        free = _run(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"]).splitlines()
        usable = float(free[0]) * 2**20 if free and free[0].strip().isdigit() else 0.0
        bandwidth = peak_bandwidth_gbs(name)
        return MachineProfile(
            name, usable, bandwidth, "spec table" if bandwidth else "unknown", usable, "free GPU memory"
        )
    chip = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):  # noqa: SIM115 - procfs
            if line.startswith("model name"):
                chip = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return MachineProfile(
        chip, _meminfo("MemTotal"), measured_bandwidth_gbs(), "measured", _meminfo("MemAvailable"), "MemAvailable"
    )


@dataclass(frozen=True)
class EnvironmentFitness:
    """Whether this machine is fit to measure now (macOS: power, Low Power Mode, heat)."""

    fit: bool
    reason: str
    details: dict[str, str]


def parse_pmset(battery: str, settings: str, thermal: str) -> EnvironmentFitness:
    """Judge ``pmset -g batt``, ``pmset -g`` and ``pmset -g therm`` output."""
    details: dict[str, str] = {}
    source = re.search(r"Now drawing from '([^']+)'", battery)
    details["power_source"] = source.group(1) if source else "unknown"
    low_power = re.search(r"^\s*lowpowermode\s+(\d)", settings, re.M)
    details["low_power_mode"] = "on" if low_power and low_power.group(1) == "1" else "off"
    limit = re.search(r"CPU_Speed_Limit\s*=\s*(\d+)", thermal)
    details["cpu_speed_limit"] = limit.group(1) if limit else "100"
    warning = re.search(r"thermal warning level[^\n]*?(\d+)", thermal, re.I)
    if "No thermal warning level has been recorded" in thermal or warning is None:
        details["thermal_warning"] = "none"
    else:
        details["thermal_warning"] = warning.group(1)
    if details["power_source"] == "Battery Power":
        return EnvironmentFitness(False, "on battery power — plug the Mac in", details)
    if details["low_power_mode"] == "on":
        return EnvironmentFitness(False, "Low Power Mode is on — turn it off (pmset -a lowpowermode 0)", details)
    if int(details["cpu_speed_limit"]) < 100 or details["thermal_warning"] not in ("none", "0"):
        return EnvironmentFitness(
            False, f"under thermal pressure (CPU speed limit {details['cpu_speed_limit']} %)", details
        )
    return EnvironmentFitness(True, "fit", details)


NOT_READ = "power and thermal state not read (pmset is macOS's); the load line says how busy the machine is"


def environment_fitness() -> EnvironmentFitness:
    """On macOS, read pmset; elsewhere nothing is refused, and the reason says that nothing was read."""
    if platform.system() != "Darwin":
        return EnvironmentFitness(True, NOT_READ, {})
    if not shutil.which("pmset"):
        return EnvironmentFitness(True, NOT_READ.replace("pmset is macOS's", "no pmset on PATH"), {})
    return parse_pmset(_run(["pmset", "-g", "batt"]), _run(["pmset", "-g"]), _run(["pmset", "-g", "therm"]))


_SWAPINS = re.compile(r"^Swapins:\s+(\d+)", re.MULTILINE)


def swap_ins() -> int | None:
    """Pages swapped in since boot (Linux ``/proc/vmstat`` pswpin, macOS ``vm_stat`` Swapins); ``None``: unknown.

    A comparison during which this grows ran against the disk, not the memory: the
    document's memory argument (claim b) is about exactly that, and such a run is not
    a measurement of SD.
    """
    vmstat = "/proc/vmstat"
    if os.path.exists(vmstat):
        with open(vmstat, encoding="ascii") as stream:
            for line in stream:
                if line.startswith("pswpin "):
                    return int(line.split()[1])
        return None
    if platform.system() == "Darwin" and shutil.which("vm_stat"):
        found = _SWAPINS.search(_run(["vm_stat"]))
        return int(found.group(1)) if found else None
    return None
