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
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pytest_specdec.render.site.data import Admit, gather
from pytest_specdec.render.site.pages import write_site


@dataclass(frozen=True)
class BuiltSite:
    """What a build wrote and what it left out."""

    index: Path
    pages: int
    skipped: tuple[str, ...]


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
    written = write_site(board, out, sources)
    return BuiltSite(out / "index.html", len(written), board.skipped)
