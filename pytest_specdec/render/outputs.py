"""Report files at the end of a run: Markdown, results JSON, forest plot, benchmark JSON.

Every file is written atomically; a file that cannot be written is reported in one
line and never stops the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.render.exports import benchmark_document, results_document
from pytest_specdec.render.plots import forest_plot
from pytest_specdec.render.report import markdown_report
from pytest_specdec.store.files import dumps, write_atomically
from pytest_specdec.store.records import RunRecord


def _pytest_benchmark_version() -> str:
    try:
        return metadata.version("pytest-benchmark")
    except metadata.PackageNotFoundError:
        return "unknown"


def check_output_folders(outputs: Mapping[str, str], base: Path) -> None:
    """Each report file's path can be written (a missing folder is made when the file is written, as
    ``--junitxml`` does) and the plot's library is installed: one line before the first pair."""
    import importlib.util

    for key, value in outputs.items():
        flag, path = f"--specdec-{key.replace('_', '-')}", base / value
        blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocking is not None:
            raise SpecdecUsageError(f"{flag} {value}: {blocking} is a file, not a folder — choose another path")
        if path.is_dir():
            raise SpecdecUsageError(f"{flag} {value} is a folder — name a file in it")
        if key == "plot" and importlib.util.find_spec("matplotlib") is None:
            raise SpecdecUsageError(f"{flag} needs matplotlib, which is not installed — pip install "
                                    "'pytest-specdec[plot]', or leave the option out")  # fmt: skip


def render_outputs(run: RunRecord, wanted: dict[str, Path]) -> tuple[list[Path], list[str]]:
    """Write each wanted output (``report_md``, ``json``, ``plot``, ``benchmark_json``)."""
    writers: dict[str, Callable[[Path], None]] = {
        "report_md": lambda path: write_atomically(path, markdown_report(run)),
        "json": lambda path: write_atomically(path, dumps(results_document(run))),
        "benchmark_json": lambda path: write_atomically(
            path, json.dumps(benchmark_document(run, _pytest_benchmark_version()), indent=2, sort_keys=True) + "\n"
        ),
        "plot": lambda path: _plot(run, path),
    }
    written: list[Path] = []
    errors: list[str] = []
    for key, path in wanted.items():
        try:
            writers[key](path)
        except ImportError as error:
            errors.append(f"cannot draw {path}: {error.name} is not installed — pip install 'pytest-specdec[plot]'")
            continue
        except OSError as error:
            errors.append(f"cannot write {path}: {error.strerror or error} — choose a writable path")
            continue
        written.append(path)
    return written, errors


def _plot(run: RunRecord, path: Path) -> None:
    forest_plot(list(run.comparisons), path, f"pytest-specdec on {run.machine_class}")
