"""A file a stranger supplies (a submission, a results file) is read within bounds: one line, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import read_json


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
