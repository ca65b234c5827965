"""How busy the machine was while a comparison measured: a busy machine's timings are not the chip's.

Around each comparison, :class:`LoadProbe` reads the 1-minute load average against the machine's
cores, and the CPU time the machine spent outside this run's own processes (pytest and the servers
it started, read with psutil), in cores over the comparison's wall time. A comparison is *busy* when
the load average, less the cores this run itself kept busy, exceeded the cores, or other processes
took more than a quarter of a core: the
report says so above the verdict table, the record keeps the reading and the gate's summary repeats
it. On a 2-core machine with a load average of 8-14, the arms decoded at 1-4 tok/s where a quiet one
gives many times that, and nothing said so.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

OTHERS_LIMIT_CORES = 0.25  # other processes' CPU, in cores, above which the timings are shared with them


@dataclass(frozen=True)
class MachineLoad:
    """The machine's load while one comparison measured (``None``: the OS does not give that reading)."""

    cores: int
    load_before: float | None  # 1-minute load average when the comparison began
    load_after: float | None  # and when it ended (it averages the last minute of measuring)
    others_cores: float | None  # CPU the machine spent outside this run's processes, in cores
    seconds: float  # the comparison's wall time the reading covers
    own_cores: float = 0.0  # CPU this run's own processes took, in cores (part of any load average)

    @property
    def busy(self) -> str:
        """Why the machine was busy, ``""`` when it was not.

        >>> MachineLoad(2, 8.2, 9.1, 1.4, 60.0, own_cores=1.0).busy
        'load average 9.1 on 2 cores (1.0 of it this run); other processes took 1.40 cores'
        >>> MachineLoad(2, 2.5, 2.9, 0.1, 60.0, own_cores=1.8).busy
        ''
        """
        said = []
        load = max((x for x in (self.load_before, self.load_after) if x is not None), default=None)
        if load is not None and load - self.own_cores > self.cores:
            said.append(f"load average {load:.1f} on {self.cores} cores ({self.own_cores:.1f} of it this run)")
        if self.others_cores is not None and self.others_cores > OTHERS_LIMIT_CORES:
            said.append(f"other processes took {self.others_cores:.2f} cores")
        return "; ".join(said)


def load_average() -> float | None:
    """The 1-minute load average (``None`` where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:  # not on this OS
        return None


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (every core; guest time is inside user time)."""
    t = psutil.cpu_times()
    total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return float(total - t.idle - getattr(t, "iowait", 0.0))


def own_cpu_s() -> dict[int, float]:
    """CPU seconds of this process (its waited-for children included) and each live descendant, by pid."""
    me = psutil.Process()
    found: dict[int, float] = {}
    for process in (me, *me.children(recursive=True)):
        try:
            times = process.cpu_times()
        except psutil.Error:  # ended while read
            continue
        found[process.pid] = (
            times.user + times.system + (times.children_user + times.children_system if process is me else 0.0)
        )
    return found


class LoadProbe:
    """Started before a comparison, finished after it: the :class:`MachineLoad` in between."""

    def __init__(self) -> None:
        self._began = time.monotonic()
        self._load = load_average()
        self._busy = _machine_busy_s()
        self._own = own_cpu_s()

    def finish(self) -> MachineLoad:
        """The reading from the start until now."""
        seconds = time.monotonic() - self._began
        own = own_cpu_s()
        ours = sum(cpu - self._own.get(pid, 0.0) for pid, cpu in own.items())
        others = (_machine_busy_s() - self._busy - ours) / seconds if seconds > 0 else None
        cores = psutil.cpu_count() or os.cpu_count() or 1
        kept = None if others is None else max(0.0, others)
        return MachineLoad(
            cores, self._load, load_average(), kept, seconds, own_cores=ours / seconds if seconds > 0 else 0.0
        )
