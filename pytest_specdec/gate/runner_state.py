"""The runner's own state: what outlives a checkout, one folder per repository, never trusted blindly.

A checkout is cleaned before every job, so the nights' history lines and the tests'
timings are kept in the runner's state folder (``SPECDEC_GATE_STATE``, default
``~/.specdec-gate/<owner>+<repository>``). Whatever a night left there is read as data
and checked: a file that does not validate is set aside (renamed, with one line saying
so) and the night goes on as if it were absent — it is never executed or trusted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.baselines import BaselineStore
from pytest_specdec.store.files import read_json
from pytest_specdec.store.nights import Night, Nights, read_nights
from pytest_specdec.store.records import RunRecord


def state_root() -> Path:
    """The runner's own folder for what outlives a checkout, one per repository."""
    explicit = os.environ.get("SPECDEC_GATE_STATE", "")
    if explicit:
        return Path(explicit)
    repository = os.environ.get("GITHUB_REPOSITORY", "") or "local"
    return Path.home() / ".specdec-gate" / repository.replace("/", "+")


def keep_history(run: RunRecord) -> Path:
    """Append a measured night's results to the runner's history."""
    nights = [Night.of_record(record, run.machine_class, False, run.finished, interrupted=run.interrupted)
              for record in run.comparisons]  # fmt: skip
    return BaselineStore(state_root(), run.machine_class).append_history(nights)


def leg_history(backend: str, baselines: Path, machine_class: str) -> Nights:
    """This backend's nights from the repository's history and the runner's, each once."""
    seen: set[tuple[str, str, str, str]] = set()
    found: list[Night] = []
    for root in (baselines, state_root()):
        path = root / "history" / f"{machine_class}.jsonl"
        for night in _history(path, trusted=root == baselines):
            if night.backend == backend and night.mark not in seen:
                seen.add(night.mark)
                found.append(night)
    return tuple(found)


def nights(backend: str, machine_class: str) -> Nights:
    """This backend's lines of the runner's own history: one line per comparison per measured night.

    Counting nights (undecided, not yet gated) reads this alone: the repository's history
    holds accepting runs and hand-made ones too, with other time stamps.
    """
    path = state_root() / "history" / f"{machine_class}.jsonl"
    return tuple(night for night in _history(path, trusted=False) if night.backend == backend)


def _told_path(machine_class: str) -> Path:
    return state_root() / "told" / f"{machine_class}.json"


def keep_told(machine_class: str, backend: str, when: str, words: Mapping[str, str]) -> None:
    """Remember the gate's word on each of a night's results (``words``: baseline key → the finding's state, such
    as "flip not confirmed"); the history line it belongs to is the one of ``backend``, that key and time ``when``."""
    if words:
        path = _told_path(machine_class)
        told = read_state_json(path)
        told.update({f"{backend}\t{key}\t{when}": word for key, word in words.items()})
        dump_state_json(path, told)


def told_nights(backend: str, machine_class: str) -> Nights:
    """This backend's nights on the runner (:func:`nights`), each with the gate's word on it as ``gate`` where
    the gate said one: the history line says what the plugin saw, the word what the night made of it."""
    told = read_state_json(_told_path(machine_class))
    found = []
    for night in nights(backend, machine_class):
        word = told.get(f"{backend}\t{night.key}\t{night.time}")
        found.append(replace(night, gate=word) if isinstance(word, str) else night)
    return tuple(found)


def set_aside(path: Path, why: str) -> str:
    """Rename a state file that does not validate out of the way; the one line that says so."""
    aside = path.with_name(f"{path.name}.set-aside-{time.strftime('%Y%m%dT%H%M%S')}")
    path.replace(aside)
    line = f"specdec gate: set aside {path} ({why}) as {aside.name}; the night goes on without it"
    sys.stderr.write(line + "\n")
    return line


def _history(path: Path, *, trusted: bool) -> Nights:
    if not path.is_file():
        return ()
    try:
        return read_nights(path, [])
    except SpecdecUsageError as error:
        if trusted:  # the repository's own history: its owner must mend it
            raise
        set_aside(path, str(error))
        return ()


def read_state_json(path: Path) -> dict[str, Any]:
    """A JSON object kept in the state folder; anything else is set aside and read as empty."""
    if not path.is_file():
        return {}
    try:
        data = read_json(path)
    except SpecdecUsageError as error:
        set_aside(path, str(error))
        return {}
    if not isinstance(data, dict):
        set_aside(path, "not a JSON object")
        return {}
    return data


def dump_state_json(path: Path, data: dict[str, Any]) -> None:
    """Write a JSON object to the state folder (sorted, atomically)."""
    from pytest_specdec.store.files import finite_json, write_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(finite_json(data), indent=2, sort_keys=True, allow_nan=False) + "\n")
