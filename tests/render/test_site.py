"""The scoreboard (``pytest-specdec site``): built from this repository's own baselines plus a store the suite measures,
opened in a real browser (Debian's chromium, headless, through chromium-driver and Selenium)."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from pytest_specdec.community.submit import Private, submissions_of
from pytest_specdec.render.site import build_site
from pytest_specdec.render.site.data import gather
from pytest_specdec.store.baselines import baseline_key, load_any
from pytest_specdec.store.files import dumps, load_run
from pytest_specdec.store.nights import Night

REPO = Path(__file__).resolve().parents[2]
MACHINE = "Site-Test-Machine"
CLAIM = """import pytest


@pytest.mark.claim(id="r", source="test", quote="SD does not pay off with this backend")
@pytest.mark.speedup(max=1.0)
def test_sd_does_not_pay_off(specdec):
    specdec.compare(category="copy")
"""


def measure(root: Path, speedup: float, *extra: str) -> None:
    """One simulated run of the claim against ``root``'s store."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "bench", "--backend=simulated", "--specdec-model=sim-target",
         "--specdec-draft=sim-draft", f"--specdec-backend-option=speedup={speedup}", "--specdec-max-tokens=16",
         f"--specdec-baselines={root / 'baselines'}", "-p", "no:cacheprovider", *extra],
        cwd=root, env={**os.environ, "SPECDEC_MACHINE_CLASS": MACHINE}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-3000:]  # 1: tonight's flip fails its test, as it should


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This repository's baselines, a claim accepted at 0.8x that flips tonight at 1.25x, and a torn file."""
    root = tmp_path_factory.mktemp("site")
    shutil.copytree(REPO / "baselines", root / "baselines")
    (root / "bench").mkdir()
    (root / "bench" / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    measure(root, 0.8, "--specdec-update-baselines")
    assert (root / "baselines" / MACHINE / "simulated.json").is_file(), "0.8x accepted"
    measure(root, 1.25, f"--specdec-json={root / 'tonight.json'}")
    assert (root / "tonight.json").is_file()
    (root / "baselines" / "Torn-Machine").mkdir()
    (root / "baselines" / "Torn-Machine" / "mlx.json").write_text('{"backend": "mlx", "entr', encoding="utf-8")
    runner = root / "nights.jsonl"  # the gate's nights.jsonl: tonight's flip, which its confirm step did not confirm
    run = load_run(root / "tonight.json")
    told = [
        replace(Night.of_record(r, MACHINE, False, run.finished), gate="flip not confirmed") for r in run.comparisons
    ]
    runner.write_text("".join(json.dumps(night.as_line()) + "\n" for night in told), encoding="utf-8")
    community = root / "community"  # tonight's result as someone would submit it: a row beside the owned one
    for submission in submissions_of(run, Private("/nowhere", "nobody-here", ()), "2026-12-04T00:00:00+00:00")[0]:
        (community / submission.relative_path.relative_to("community")).parent.mkdir(parents=True, exist_ok=True)
        (community / submission.relative_path.relative_to("community")).write_text(dumps(submission))
    built = build_site(root / "out", root / "baselines", [root / "tonight.json"], [runner], community=community)
    assert any("Torn-Machine/mlx.json" in line for line in built.skipped), built.skipped
    return root / "out"


def test_a_submitted_result_is_a_row_beside_the_owned_one_and_says_so(site: Path) -> None:
    index = (site / "index.html").read_text()
    rows = [r for r in index.split("<tr ") if f">{MACHINE}" in r and "copy" in r]
    assert len(rows) == 2, rows
    submitted = [r for r in rows if "(submitted, not reproduced)" in r]
    assert len(submitted) == 1
    page = re.search(r'href="(comparisons/[^"]+)"', submitted[0])
    assert page is not None
    assert "Submitted, not reproduced" in (site / page.group(1)).read_text()
    owned = re.search(r'href="(comparisons/[^"]+)"', next(r for r in rows if r is not submitted[0]))
    assert owned is not None
    assert owned.group(1) != page.group(1)
    assert "Submitted, not reproduced" not in (site / owned.group(1)).read_text()


def test_the_h200_rows_numbers_are_on_their_pages(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    for path in sorted((REPO / "baselines" / "NVIDIA-H200").glob("*.json")):
        for entry in load_any(path).entries.values():
            s = entry.result.speedup
            shown = f"{s.estimate:.2f}x [{s.low:.2f}, {s.high:.2f}]"
            assert shown in index, f"{path.name}: {shown} on the front page"
            pages = [p for p in (site / "comparisons").glob("NVIDIA-H200-*.html") if shown in p.read_text()]
            assert pages, f"{path.name}: {shown} on a comparison page"


def test_a_torn_file_is_skipped_and_listed_and_the_rest_is_built(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    assert re.search(r'id="skipped".*Torn-Machine/mlx.json', index, re.S)
    assert "NVIDIA-H200" in index
    done = subprocess.run([sys.executable, "-m", "pytest_specdec.cli", "site", str(site.parent / "again"),
                           "--baselines", str(site.parent / "baselines")], capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "specdec site: skipped 1 file(s) (listed on the front page):" in done.stdout


def test_a_site_built_without_results_says_why_make_benchs_run_is_not_on_it(site: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "pytest_specdec.cli", "site", "out", "--baselines", str(site.parent / "baselines")]
    env = {**os.environ, "SPECDEC_MACHINE_CLASS": "First-Look-Machine"}
    quiet = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False, env=env)
    assert "(none of First-Look-Machine) and published figures; a run of yours shows with --results" in quiet.stdout
    (tmp_path / "bench-results.json").write_text("{}", encoding="utf-8")
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    assert "make bench's run (bench-results.json) is not on it — add --results bench-results.json" in done.stdout


def test_a_rebuild_redraws_no_plot_whose_nights_did_not_change(site: Path) -> None:
    plots = {p: p.stat().st_mtime_ns for p in (site / "plots").glob("*.svg")}
    assert plots, "the claim pages with nights have plots"
    build_site(site, site.parent / "baselines", [site.parent / "tonight.json"], [site.parent / "nights.jsonl"])
    assert {p: p.stat().st_mtime_ns for p in (site / "plots").glob("*.svg")} == plots


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-background-networking", "--disable-gpu"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    from selenium.webdriver.chrome.service import Service

    opened = webdriver.Chrome(service=Service(driver), options=options)
    yield opened
    opened.quit()


def pages(site: Path) -> dict[str, Path]:
    """One page of each kind."""
    flipped = next(p for p in (site / "comparisons").glob(f"{MACHINE}-*.html"))
    return {"matrix": site / "index.html", "claim": next((site / "claims").glob(f"{MACHINE}-*.html")),
            "comparison": flipped, "releases": site / "releases.html"}  # fmt: skip


@pytest.mark.parametrize("width", [1280, 390])
def test_each_kind_of_page_opens_without_errors_and_every_link_resolves(
    site: Path, browser: Any, width: int, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    browser.set_window_size(width, 900)
    for kind, page in pages(site).items():
        browser.get(page.as_uri())
        severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert severe == [], f"{kind}: {severe}"
        for link in browser.find_elements(By.CSS_SELECTOR, "a[href]"):
            href = link.get_attribute("href") or ""
            parts = urlsplit(href)
            if parts.scheme != "file":
                continue
            target = Path(unquote(parts.path))
            assert target.is_file(), f"{kind}: a link to {target} that is not there"
            if parts.fragment:
                assert f'id="{parts.fragment}"' in target.read_text(encoding="utf-8"), f"{kind}: #{parts.fragment}"
        for table in browser.find_elements(By.TAG_NAME, "table"):
            headers = table.find_elements(By.TAG_NAME, "th")
            assert headers, f"{kind}: a table without header cells"
            assert all(h.get_attribute("scope") in ("col", "row") for h in headers), f"{kind}: th without scope"
        assert browser.get_screenshot_as_file(str(tmp_path / f"{kind}-{width}.png"))


def test_the_matrix_says_a_flip_in_words_and_its_filters_work(site: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.set_window_size(1280, 900)
    browser.get((site / "index.html").as_uri())
    (row,) = [r for r in browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr") if MACHINE in r.text]
    assert "flip not confirmed: refuted (was holds)" in row.text, "the gate's own word on tonight's flip"
    assert "SD pays off here" in row.text, "the answer against 1x, in words"
    Select(browser.find_element(By.CSS_SELECTOR, 'select[data-filter="backend"]')).select_by_value("simulated")
    shown = [r for r in browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr") if r.is_displayed()]
    assert [r.get_attribute("data-backend") for r in shown] == ["simulated"]
    Select(browser.find_element(By.CSS_SELECTOR, 'select[data-filter="backend"]')).select_by_value("")
    Select(browser.find_element(By.CSS_SELECTOR, 'select[data-filter="chip"]')).select_by_value("NVIDIA-H200")
    shown = [r for r in browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr") if r.is_displayed()]
    assert shown, "the H200's rows"
    assert {r.get_attribute("data-chip") for r in shown} == {"NVIDIA-H200"}
    Select(browser.find_element(By.CSS_SELECTOR, 'select[data-filter="chip"]')).select_by_value("")
    Select(browser.find_element(By.CSS_SELECTOR, 'select[data-filter="family"]')).select_by_value("M1")
    shown = [r for r in browser.find_elements(By.CSS_SELECTOR, "#matrix tbody tr") if r.is_displayed()]
    assert shown, "the document's own M1 Max figures, published"
    assert all("published" in (r.get_attribute("class") or "") for r in shown)


def test_a_chart_marks_the_packages_that_moved_and_the_flips() -> None:
    from pytest_specdec.render.site.chart import layout

    def night(day: int, mlx_lm: str, change: str) -> Night:
        return Night.of_line({"time": f"2026-12-0{day}T03:00:00", "release": f"mlx-lm {mlx_lm}", "change": change,
                "versions": {"mlx": "0.32.4", "mlx-lm": mlx_lm}, "acceptance": 0.8,
                "speedup": {"estimate": 1.1, "low": 1.0, "high": 1.2}})  # fmt: skip

    drawn = layout((night(1, "0.32.2", "unchanged"), night(2, "0.32.3", "flip")), {"speedup max=1.2": 1.2}, "d")
    assert [c["label"] for c in drawn["changes"]] == ["mlx-lm 0.32.2→0.32.3"], "only the package that moved"
    assert len(drawn["flips"]) == 1
    assert [b["label"] for b in drawn["bounds"]] == ["speedup max=1.2"]


def test_a_flip_no_gate_has_read_is_flipped_and_one_the_gate_did_not_confirm_is_said_so(site: Path) -> None:
    root = site.parent
    (plain,) = [r for r in gather(root / "baselines", [root / "tonight.json"], []).rows if r.machine_class == MACHINE]
    assert (plain.flip_word, plain.flipped) == ("flipped", "refuted (was holds)"), "no gate's word: a flip"
    claim = (site / "claims" / plain.claim_page).read_text(encoding="utf-8")
    assert re.search(r'class="flip">flip</td><td>flip not confirmed</td>', claim), "the night's row says the word"
    (plot,) = re.findall(r'src="../plots/([0-9a-f]+\.svg)"', claim)
    assert "<title>flip not confirmed</title>" in (site / "plots" / plot).read_text(encoding="utf-8")


def test_published_figures_link_to_their_source(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    assert '<a href="https://github.com/lmstudio-ai/mlx-engine/issues/103">' in index


def test_the_comparison_pages_command_measures_the_same_comparison_again(site: Path) -> None:
    root = site.parent
    (row,) = [r for r in gather(root / "baselines", [root / "tonight.json"], []).rows if r.machine_class == MACHINE]
    page = (site / "comparisons" / row.page).read_text(encoding="utf-8")
    (command,) = re.findall(r"<h2>Reproduce</h2>\s*<p><code>([^<]+)</code>", page)
    words = shlex.split(html.unescape(command))
    assert words[:2] == ["pytest", row.record.nodeid]
    again = root / "again.json"
    done = subprocess.run(
        [sys.executable, "-m", *words, "--specdec-backend-option=speedup=1.25", f"--specdec-json={again}",
         f"--specdec-baselines={root / 'baselines'}", "-p", "no:cacheprovider"],
        cwd=root, env={**os.environ, "SPECDEC_MACHINE_CLASS": MACHINE}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-3000:]
    (measured,) = load_run(again).comparisons
    assert baseline_key(measured) == row.key, "the same comparison: test, models, conditions"
    assert (measured.scope["max_tokens"], measured.trials <= int(row.record.scope["max_trials"])) == (
        row.record.scope["max_tokens"],
        True,
    )


def test_the_release_view_is_each_release_by_machine_class(site: Path) -> None:
    releases = (site / "releases.html").read_text(encoding="utf-8")
    simulated = releases[releases.index("<h2>simulated</h2>") :]
    assert f'<th scope="col">{MACHINE}</th>' in simulated
    assert re.search(r'<th scope="row">simulated 1.0</th><td>2 readings; 1 flip not confirmed</td>', simulated), (
        simulated[:1500]
    )


def test_a_submission_validate_rejects_is_left_out_and_named(site: Path) -> None:
    root = site.parent
    board = gather(root / "baselines", [], [], community=root / "community", admit=lambda _: "its interval was edited")
    assert not [row for row in board.rows if row.submitted]
    assert any("rejected by pytest-specdec validate: its interval was edited" in line for line in board.skipped)
    shown = gather(root / "baselines", [], [], community=root / "community", admit=lambda _: None)
    assert [row for row in shown.rows if row.submitted]


def test_several_submissions_of_one_key_are_pooled_into_one_answer(site: Path, tmp_path: Path) -> None:
    """Three people submit the claim on one machine class: the row is the newest, shown with the three of its
    release pooled (a fourth, of another release, is not); its page says so, with the bound's verdict on it."""
    (original,) = (site.parent / "community").rglob("*.json")
    data = json.loads(original.read_text())
    folder = tmp_path / "community" / original.parent.name
    folder.mkdir(parents=True)
    for n, (level, release) in enumerate([(1.22, None), (1.30, None), (1.26, None), (2.0, "simulated 9.9")]):
        copy = json.loads(json.dumps(data))
        copy["submitted"] = f"2026-12-0{5 + n}T00:00:00+00:00"
        s = copy["comparison"]["speedup"]
        s["estimate"], s["low"], s["high"] = level, level * 0.95, level / 0.95
        if release:
            copy["comparison"]["release"] = release
        (folder / f"{n}-{original.name}").write_text(json.dumps(copy))
    board = gather(site.parent / "baselines", [], [], community=tmp_path / "community", admit=lambda _: None)
    (row,) = [r for r in board.rows if r.submitted and r.machine_class == original.parent.name]
    assert row.record.release == "simulated 9.9", "the newest submission is the row"
    assert row.pooled is None, "one submission of its release: nothing to pool"
    (folder / f"3-{original.name}").unlink()
    board = gather(site.parent / "baselines", [], [], community=tmp_path / "community", admit=lambda _: None)
    (row,) = [r for r in board.rows if r.submitted and r.machine_class == original.parent.name]
    assert row.pooled is not None
    assert row.pooled.interval.n == 3
    assert 1.22 < row.pooled.interval.estimate < 1.30
    assert row.pooled.interval.low < 1.22, "wider than the spread of three machines' own estimates"
    assert row.pooled.interval.high > 1.30
    out = tmp_path / "out"
    build_site(out, site.parent / "baselines", [], [], community=tmp_path / "community")
    page = next(p for p in (out / "comparisons").glob("*.html") if "All its submissions as one answer" in p.read_text())
    said = re.search(r"(1\.2\dx) \[(1\.\d\d), (1\.\d\d)\] pooled over 3 submissions of simulated 1\.0 "
                     r"\(machines apart ±\d\.\d%, speedup max=1: (\w+)\)", page.read_text())  # fmt: skip
    assert said is not None, page.read_text()[:2000]
    p = row.pooled.interval
    assert said.groups() == (f"{p.estimate:.2f}x", f"{p.low:.2f}", f"{p.high:.2f}", "refuted"), "above 1x: refuted"
    assert "pooled over 3 submissions" in (out / "index.html").read_text()


def test_a_real_model_and_a_synthetic_one_never_look_the_same_on_the_matrix(site: Path) -> None:
    """The H200's Gemma 3 270M rows and its synthetic-pair rows share machine, backend, claim and category: the
    model column (and the words' self-test label) tells them apart."""
    root = site.parent
    rows = [r for r in gather(root / "baselines", [root / "tonight.json"], []).rows if r.machine_class == "NVIDIA-H200"]
    synthetic = [r for r in rows if r.record.target.startswith("embedded:")]
    real = [r for r in rows if not r.record.target.startswith("embedded:")]
    assert synthetic
    assert real
    assert all("(synthetic)" in r.model and r.words.startswith("self-test") for r in synthetic)
    assert not any("(synthetic)" in r.model or r.words.startswith("self-test") for r in real)
    index = (site / "index.html").read_text(encoding="utf-8")
    assert '<th scope="col">model</th>' in index
    assert all(f"<td>{r.model}</td>" in index for r in rows[:5])
