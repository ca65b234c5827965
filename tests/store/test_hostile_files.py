"""A file a stranger supplies (a submission, a results file) is read within bounds: one line, never a traceback."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import dumps, load_run, read_json
from pytest_specdec.store.records import RunRecord


def test_a_link_to_an_endless_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    (tmp_path / "submission.json").symlink_to("/dev/zero")
    with pytest.raises(SpecdecUsageError, match=r"submission.json is not a regular file"):
        read_json(tmp_path / "submission.json")


def test_json_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    with pytest.raises(SpecdecUsageError, match=r"deep.json is nested too deeply"):
        read_json(path)


def test_a_file_beyond_the_bound_is_left_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text('{"padding": "' + "x" * 2048 + '"}', encoding="utf-8")
    with pytest.raises(SpecdecUsageError, match=r"big.json is larger than 0 MiB: not a file pytest-specdec wrote"):
        read_json(path, limit=1024)
    assert read_json(path) == {"padding": "x" * 2048}, "within the default bound it reads"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda c: c["speedup"].update(estimate="nan"), "comparison 1's speedup is not a number (nan)"),
        (lambda c: c.update(protocol=99), "comparison 1 was measured under protocol 99, newer than this"),
    ],
    ids=["nan estimate", "future protocol"],
)
def test_a_results_file_that_no_release_wrote_is_refused_not_rendered(
    tmp_path: Path, sample_run: RunRecord, change: Callable[[dict[str, Any]], None], said: str
) -> None:
    data = json.loads(dumps(sample_run))
    change(data["comparisons"][0])
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SpecdecUsageError, match=re.escape(said)):
        load_run(path)
    path.write_text(dumps(sample_run), encoding="utf-8")
    assert load_run(path).comparisons == sample_run.comparisons, "the file as written reads"
