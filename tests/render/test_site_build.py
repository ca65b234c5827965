"""The scoreboard is built beside its folder and moved into place whole: never half a site."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.render import site
from pytest_specdec.render.site import build_site


def test_a_build_interrupted_midway_leaves_the_previous_site_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "site"
    first = build_site(out, tmp_path / "baselines")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert first.index.is_file()
    real = site.write_site

    def interrupted(board: Any, folder: Path, sources: str) -> list[Path]:
        real(board, folder, sources)  # every page written in the new folder, then the signal lands
        raise KeyboardInterrupt

    monkeypatch.setattr(site, "write_site", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_site(out, tmp_path / "baselines")
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before, "the previous site, as it was"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"], "no half-built folder left beside it"


def test_a_folder_that_holds_other_files_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(SpecdecUsageError, match=r"holds files but no site \(no index.html\)"):
        build_site(tmp_path, tmp_path / "baselines")
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine\n"
