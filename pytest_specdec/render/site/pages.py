"""The scoreboard's pages: a matrix, a page per claim and machine class, a page per comparison, a release view.

Jinja2 templates (``templates/``, autoescaped), one stylesheet inline, no script or font from elsewhere:
the site opens from ``file://`` and from GitHub Pages alike. Charts are SVG files (:mod:`.chart`) named by
a digest of what they draw, so a rebuild redraws only the charts whose nights changed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import shlex
from collections import Counter
from collections.abc import Mapping
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from pytest_specdec.render.site.chart import layout
from pytest_specdec.render.site.data import Published, Row, Scoreboard, flip_word
from pytest_specdec.stats import verdict_on
from pytest_specdec.store.files import write_atomically
from pytest_specdec.store.nights import Night, Nights


def _interval(estimate: float, low: float, high: float) -> str:
    return f"{estimate:.2f}x [{low:.2f}, {high:.2f}]"


def chip_family(name: str) -> str:
    """``M1`` from ``Apple-M1-Max-64GB`` or ``M1 Max 64 GB``; another machine's name as it is.

    >>> chip_family("Apple-M4-Pro-48GB"), chip_family("M1 Max 64 GB"), chip_family("NVIDIA-H200")
    ('M4', 'M1', 'NVIDIA-H200')
    """
    found = re.search(r"(?:^|[-\s])(M\d+)(?:$|[-\s])", name)
    return found.group(1) if found else name


@dataclass(frozen=True)
class Shown:
    """A row as the templates show it: text only."""

    row: Row

    def __getattr__(self, name: str) -> Any:
        return getattr(self.row, name)

    @property
    def machine(self) -> str:
        return self.row.machine_class

    @property
    def backend(self) -> str:
        return self.row.record.backend

    @property
    def category(self) -> str:
        return self.row.record.category

    @property
    def family(self) -> str:
        """The chip family a machine class names (``Apple-M1-Max-64GB`` → ``M1``), else the class itself."""
        return chip_family(self.row.machine_class)

    @property
    def conditions(self) -> str:
        """Every axis the row ran under, as its baseline key labels them (``γ=3, T=0.7``)."""
        return ", ".join(self.row.record.conditions.key_labels)

    @property
    def verdict(self) -> str:
        return self.row.record.judgement.shown

    @property
    def css(self) -> str:
        return self.row.record.judgement.conclusion.value.replace(" ", "-")

    @property
    def bounds(self) -> str:
        return ", ".join(f"{label}: {v.value}" for label, v in self.row.record.judgement.bound_verdicts.items())

    @property
    def speedup(self) -> str:
        s = self.row.record.speedup
        return _interval(s.estimate, s.low, s.high)

    @property
    def pooled(self) -> str:
        """A submitted row's submissions of its release as one answer, with each speedup bound's verdict on it."""
        pooled = self.row.pooled
        if pooled is None:
            return ""
        p = pooled.interval
        bounds = [b for b in self.row.record.judgement.bounds if b.metric == "speedup"]
        verdicts = "".join(f", {b.label}: {verdict_on(p, b.kind, b.bound).value}" for b in bounds)
        return (
            f"{_interval(p.estimate, p.low, p.high)} pooled over {p.n} submissions of {self.row.record.release} "
            f"(machines apart ±{math.expm1(pooled.tau):.1%}{verdicts})"
        )

    @property
    def acceptance(self) -> str:
        a = self.row.record.acceptance
        return "" if a is None else _interval(a.estimate, a.low, a.high).replace("x", "")

    @property
    def release(self) -> str:
        return self.row.record.release

    @property
    def date(self) -> str:
        return self.row.when[:10]


def _published(item: Published) -> dict[str, str]:
    words = "SD pays off" if item.speedup > 1.0 else "SD does not pay off" if item.speedup < 1.0 else "breaks even"
    return {"chip": item.chip, "family": chip_family(item.chip), "backend": item.backend, "claim": item.claim, "model": item.model,
            "speedup": f"{item.speedup:.2f}x (published)", "words": f"{words} (published, not reproduced here)",
            "source": item.source, "paired": "paired" if item.paired else "unpaired",
            "link": item.source if item.source.startswith("https://") else ""}  # fmt: skip


def _night(night: Night) -> dict[str, str]:
    s, acceptance = night.speedup, night.acceptance
    return {"time": night.time[:16].replace("T", " "), "release": night.release,
            "speedup": _interval(s.estimate, s.low, s.high), "verdict": night.verdict,
            "acceptance": f"{acceptance:.2f}" if acceptance is not None else "—",
            "change": night.change or "", "told": night.gate or ""}  # fmt: skip


def _fingerprint(row: Row) -> list[tuple[str, str]]:
    r = row.record
    return [("machine class", row.machine_class), ("backend release", r.release),
            *((f"version: {name}", value) for name, value in sorted(r.versions.items())),
            ("device", r.device), ("target", r.target), ("draft", str(r.draft)), ("model digest", r.model_digest),
            ("conditions", json.dumps(r.conditions.dump(), sort_keys=True)), ("protocol", str(r.protocol)),
            ("pairs", str(r.trials)), ("profile", r.profile)]  # fmt: skip


def _command(row: Row) -> str:
    """The command that measures this comparison again: its test, backend and profile (the models, where the user
    named them), the sizes it ran with (``scope``) and γ where one was set. Backend options, another plain
    runtime and models given over a named profile are not in the record: the page says so beside it."""
    r = row.record
    words = ["pytest", shlex.quote(r.nodeid), f"--backend={r.backend}"]
    if r.profile == "user":  # the models the user named: no profile names them
        words.append(f"--specdec-model={shlex.quote(r.target)}")
        words += [f"--specdec-draft={shlex.quote(r.draft)}"] if r.draft else []
    else:
        words.append(f"--specdec-profile={r.profile}")
    design = r.design
    sizes = (("max-tokens", design.max_tokens), ("min-trials", design.min_trials), ("max-trials", design.max_trials))
    words += [f"--specdec-{name}={value}" for name, value in sizes if value is not None]
    words += [f"--specdec-num-draft={r.num_draft}"] if r.num_draft > 0 else []
    return " ".join(words)


def _plot(folder: Path, nights: Nights, bounds: Mapping[str, float], title: str) -> str | None:
    """An SVG chart of the nights, named by a digest of what it draws; written only when no file of that name
    exists (:mod:`.chart`)."""
    if not nights:
        return None
    drawn = [[n.time, n.release, dict(n.versions), astuple(n.speedup), n.acceptance, n.change, n.gate] for n in nights]
    name = hashlib.sha256(json.dumps([drawn, bounds, title], sort_keys=True).encode()).hexdigest()[:16] + ".svg"
    path = folder / name
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(path, _environment().get_template("nights.svg.j2").render(layout(nights, bounds, title)))
    return name


def release_grids(
    nights: Mapping[tuple[str, str, str], Nights],
) -> dict[str, tuple[list[str], list[tuple[str, list[tuple[str, bool]]]]]]:
    """Per backend, each release (oldest first) × machine class: how many readings, and whether any flipped
    (in the gate's word where it said one) — the release view's grid: machine classes, then rows of cells, each
    its text and whether a flip the gate confirmed (or no gate read) is among them.

    >>> from dataclasses import replace
    >>> night = Night.of_line({"time": "t1", "release": "mlx-lm 0.1", "change": "flip", "gate": "flip not confirmed"})
    >>> release_grids({("M1", "mlx", "k"): (night, replace(night, gate="conclusion changed"))})
    {'mlx': (['M1'], [('mlx-lm 0.1', [('2 readings; 1 flip not confirmed; 1 flipped', True)])])}
    """
    cells: dict[str, dict[str, dict[str, list[Night]]]] = {}
    first: dict[tuple[str, str], str] = {}
    for (machine, backend, _key), kept in nights.items():
        for night in kept:
            release, time = night.release, night.time
            cells.setdefault(backend, {}).setdefault(release, {}).setdefault(machine, []).append(night)
            first[backend, release] = min(first.get((backend, release), time), time)
    grids = {}
    for backend, releases in sorted(cells.items()):
        machines = sorted({machine for by_machine in releases.values() for machine in by_machine})
        rows = []
        for release in sorted(releases, key=lambda r: (first[backend, r], r)):
            row = []
            for machine in machines:
                lines = releases[release].get(machine, [])
                words = Counter(flip_word(night.gate) for night in lines if night.change == "flip")
                said = "".join(f"; {n} {word}" for word, n in sorted(words.items()))
                row.append(
                    (f"{len(lines)} reading{'s' * (len(lines) != 1)}{said}" if lines else "—", "flipped" in words)
                )
            rows.append((release, row))
        grids[backend] = (machines, rows)
    return grids


@functools.cache
def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_specdec.render.site", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )


def write_site(board: Scoreboard, out: Path, sources: str) -> list[Path]:
    """Every page of ``board`` under ``out``; the pages written."""
    templates, written = _environment(), []
    shown = [Shown(row) for row in board.rows]

    def page(path: Path, template: str, root: str, **context: Any) -> None:
        html = templates.get_template(template).render(root=root, sources=sources, **context)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, html)
        written.append(path)

    filters = [("family", sorted({r.family for r in shown} | {chip_family(p.chip) for p in board.published})),
               ("chip", sorted({r.machine for r in shown} | {p.chip for p in board.published})),
               ("backend", sorted({r.backend for r in shown} | {p.backend for p in board.published})),
               ("claim", sorted({r.claim for r in shown} | {p.claim for p in board.published}))]  # fmt: skip
    page(out / "index.html", "index.html.j2", "", title="Matrix", rows=shown, filters=filters,
         published=[_published(p) for p in board.published], skipped=board.skipped)  # fmt: skip
    for row in shown:
        nights = () if row.submitted else board.nights.get((row.machine, row.backend, row.key), ())
        bounds = {b.label: b.bound for b in row.record.judgement.bounds}
        plot = _plot(out / "plots", nights, bounds, f"{row.claim} [{row.category}] on {row.machine} ({row.backend})")
        page(out / "claims" / row.claim_page, "claim.html.j2", "../", title=row.claim, row=row, plot=plot,
             nights=[_night(n) for n in nights])  # fmt: skip
        page(out / "comparisons" / row.page, "comparison.html.j2", "../", title=row.claim, row=row,
             notes=row.record.notes, fingerprint=_fingerprint(row.row), command=_command(row.row))  # fmt: skip
    changes: dict[str, list[dict[str, str]]] = {}
    for (machine, backend, key), nights in sorted(board.nights.items()):
        for night in nights:
            if night.change == "flip":
                changes.setdefault(backend, []).append({**_night(night), "machine": machine, "key": key})
    grids = release_grids(board.nights)
    backends = sorted({r.backend for r in shown} | set(changes) | set(grids))
    page(out / "releases.html", "releases.html.j2", "", title="Releases",
         releases=[(b, grids.get(b, ([], [])), changes.get(b, [])) for b in backends])  # fmt: skip
    return written
