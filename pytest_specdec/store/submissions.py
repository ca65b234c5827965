"""A submitted result: one comparison, self-describing, as ``pytest-specdec submit`` writes it and anyone can read.

A submission is one file per comparison under ``community/<machine class>/``: the comparison
exactly as a results file keeps it (:class:`~pytest_specdec.store.records.ComparisonRecord`,
with every pair's timings and counts), the machine it ran on (chip, memory, OS: no host or
user name), the command that ran it and when it was submitted::

    {"kind": "pytest-specdec submission", "schema_version": 1, "specdec_version": "0.1.0",
     "submitted": ISO-8601, "command": "pytest benchmarks/ --backend=mlx ...",
     "machine": {"machine_class": "Apple-M1-Max-64GB", "chip": "Apple M1 Max", "memory_gb": 64,
                 "gpu_cores": null, "os": "Darwin 24.1.0", "arch": "arm64", "python": "3.12.7"},
     "comparison": ComparisonRecord (results-file schema 3)}

This module is the shape and its reading; what a submission may contain and how it is
checked live in :mod:`pytest_specdec.community`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import read_json, validate
from pytest_specdec.store.records import ComparisonRecord, migrate_comparison

SUBMISSION_KIND = "pytest-specdec submission"
SUBMISSION_SCHEMA = 1
COMMUNITY = Path("community")  # the folder of submitted results in the project's repository


@dataclass(frozen=True)
class SubmittedMachine:
    """The machine a submitted comparison ran on: what makes it comparable, nothing that names its owner."""

    machine_class: str
    chip: str
    memory_gb: int | None
    os: str
    arch: str
    python: str
    gpu_cores: int | None = None


@dataclass(frozen=True)
class Submission:
    """One submitted comparison (see the module's docstring for the file)."""

    kind: str
    schema_version: int
    specdec_version: str
    submitted: str
    command: str
    machine: SubmittedMachine
    comparison: ComparisonRecord

    @property
    def relative_path(self) -> Path:
        """Where it lives in the repository: ``community/<machine class>/<backend>-<digest of its key>.json``."""
        import hashlib

        from pytest_specdec.store.baselines import baseline_key, check_plain_name

        digest = hashlib.sha256(
            f"{baseline_key(self.comparison)}\0{self.comparison.release}\0{self.submitted}".encode()
        ).hexdigest()[:12]
        machine = check_plain_name("machine_class", self.machine.machine_class, "the submission")
        return (
            COMMUNITY
            / machine
            / f"{check_plain_name('backend', self.comparison.backend, 'the submission')}-{digest}.json"
        )


def parse_submission(data: object, where: str) -> Submission:
    """A submission from parsed JSON, or one line naming what is wrong.

    >>> parse_submission({"kind": "x"}, "f.json")
    Traceback (most recent call last):
    ...
    pytest_specdec.errors.SpecdecUsageError: f.json is not a pytest-specdec submission (its "kind" is 'x') — give a file written by specdec submit
    """
    if not isinstance(data, dict):
        raise SpecdecUsageError(
            f"{where}: expected a JSON object at the top level — give a file written by pytest-specdec submit"
        )
    if data.get("kind") != SUBMISSION_KIND:
        raise SpecdecUsageError(
            f'{where} is not a pytest-specdec submission (its "kind" is {data.get("kind")!r}) — give a file written '
            "by specdec submit"
        )
    version = data.get("schema_version")
    if version != SUBMISSION_SCHEMA:
        raise SpecdecUsageError(
            f"{where}: submission schema_version {version!r} is not one this pytest-specdec reads ({SUBMISSION_SCHEMA})"
            " — upgrade pytest-specdec"
        )
    comparison = data.get("comparison")
    moved = dict(data, comparison=migrate_comparison(comparison)) if isinstance(comparison, dict) else data
    submission = validate(Submission, moved, where)
    submission.relative_path  # noqa: B018 -- its machine class and backend name a folder and a file: plain names
    return submission


def read_submission(path: Path) -> Submission:
    """The submission in ``path``, or one line naming the file and what is wrong."""
    return parse_submission(read_json(path), str(path))


def list_submissions(folder: Path) -> list[Path]:
    """Every submission file under ``folder`` (``community/<machine class>/*.json``), in name order."""
    return sorted(folder.glob("*/*.json")) if folder.is_dir() else []
