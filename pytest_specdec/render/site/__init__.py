"""``pytest-specdec site OUT/``: the scoreboard, a static site every browser opens (``file://`` or GitHub Pages).

:mod:`.data` gathers the store into frozen rows; :mod:`.pages` renders them with Jinja2 and draws SVG plots.

Example::

    from pathlib import Path
    from pytest_specdec.render.site import build_site

    built = build_site(Path("site"), Path("baselines"), [Path("results.json")])
    print(built.pages, built.skipped)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.render.site.data import Admit, gather
from pytest_specdec.render.site.pages import write_site


@dataclass(frozen=True)
class BuiltSite:
    """What a build wrote and what it left out."""

    index: Path
    pages: int
    skipped: tuple[str, ...]


PLOTS = "plots"  # named by a digest of what they draw: one already drawn is never drawn again


def _keep_plots(old: Path, new: Path) -> None:
    """The previous site's plots, hard-linked into the new build (copied where links cannot be made)."""
    if not old.is_dir():
        return
    new.mkdir(parents=True, exist_ok=True)
    for plot in old.glob("*.svg"):
        try:
            os.link(plot, new / plot.name)
        except OSError:
            shutil.copy2(plot, new / plot.name)


def seed_evidence() -> list[dict[str, object]]:
    """The published figures the seed ships (``seed/evidence.json``)."""
    text = resources.files("pytest_specdec.seed").joinpath("evidence.json").read_text(encoding="utf-8")
    rows = json.loads(text).get("rows", [])
    return [row for row in rows if isinstance(row, dict)]


def build_site(
    out: Path,
    baselines: Path,
    results: Sequence[Path] = (),
    histories: Sequence[Path] = (),
    *,
    community: Path | None = None,
    admit: Admit | None = None,
) -> BuiltSite:
    """Build the site of ``baselines`` (with tonight's ``results`` files, runners' ``histories`` and the
    submitted results under ``community`` that ``admit`` lets through) under ``out``."""
    board = gather(baselines, results, seed_evidence(), histories, community=community, admit=admit)
    shown_community = [str(community)] if community is not None and community.is_dir() else []
    sources = ", ".join(
        [str(baselines), *map(str, [*results, *histories]), *shown_community, "the seed's evidence.json"]
    )
    if out.is_dir() and any(out.iterdir()) and not (out / "index.html").is_file():
        raise SpecdecUsageError(
            f"{out} holds files but no site (no index.html): name an empty folder or an earlier site — it is "
            "replaced whole, so nothing was written"
        )
    out.absolute().parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.absolute().parent))
    try:  # built beside it, then moved into place whole: an interrupted build leaves the previous site (or none)
        _keep_plots(out / PLOTS, building / PLOTS)
        written = write_site(board, building, sources)
        if out.exists():
            aside = building.with_name(building.name.replace(".building-", ".previous-"))
            out.rename(aside)
            building.rename(out)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            building.rename(out)
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return BuiltSite(out / "index.html", len(written), board.skipped)
