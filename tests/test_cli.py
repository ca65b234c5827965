"""The ``specdec`` command and the baseline store's locking and atomic writes."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from filelock import FileLock

from pytest_specdec.cli import main
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.hardware import NOT_READ
from pytest_specdec.store.baseline_files import reviewable_json
from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, baseline_key
from pytest_specdec.store.files import dumps
from pytest_specdec.store.records import ComparisonRecord, Provenance, RunRecord


def accepted_store(root: Path, make_record: Callable[..., ComparisonRecord]) -> BaselineStore:
    store = BaselineStore(root, "Apple-M1-Max-64GB")
    record = make_record("code", 0.94, "holds", None)
    store.write("mlx", {baseline_key(record): BaselineEntry(record, Provenance.MEASURED, "2026-11-01T00:00:00+00:00")})
    return store


def test_cli_never_imports_the_pytest_plugin() -> None:
    code = "import sys, pytest_specdec.cli; assert 'pytest_specdec.plugin' not in sys.modules and 'pytest' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_baselines_list_show_and_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_record: Callable[..., ComparisonRecord]
) -> None:
    store = accepted_store(tmp_path, make_record)
    newer = make_record("code", 1.41, "refuted", None)
    store.write("mlx", {baseline_key(newer): BaselineEntry(newer, Provenance.MEASURED, "2026-11-30")}, candidates=True)
    assert main(["baselines", "list", "--dir", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "Apple-M1-Max-64GB" in listed
    assert "0.94x [0.89, 0.99]" in listed
    assert "measured" in listed
    assert main(["baselines", "show", "--dir", str(tmp_path), "test_mlx_draft[code]"]) == 0
    shown = capsys.readouterr().out
    assert json.loads(shown.split("\n", 1)[1])["result"]["speedup"]["estimate"] == 0.94
    assert main(["baselines", "diff", "--dir", str(tmp_path)]) == 0
    assert "0.94x [0.89, 0.99] (mlx-lm 0.33.0)" in capsys.readouterr().out


def test_baselines_accept_takes_the_reviewed_candidates_as_they_are_and_holds_back_inconclusive_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_record: Callable[..., ComparisonRecord]
) -> None:
    store = accepted_store(tmp_path, make_record)
    decided, open_ = make_record("code", 1.41, "refuted", None), make_record("prose", 1.2, "inconclusive", None)
    keys = {name: baseline_key(r) for name, r in (("decided", decided), ("open", open_))}
    store.write("mlx", {keys["decided"]: BaselineEntry(decided, Provenance.MEASURED, "2026-11-30"),
                        keys["open"]: BaselineEntry(open_, Provenance.MEASURED, "2026-11-30")}, candidates=True)  # fmt: skip
    assert (tmp_path / "candidates" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert main(["baselines", "accept", "--dir", str(tmp_path), "no-such-test"]) == 2
    assert "no candidate whose key contains 'no-such-test'" in capsys.readouterr().err
    assert main(["baselines", "accept", "--dir", str(tmp_path)]) == 0
    said = capsys.readouterr().out
    assert f"not accepted: {keys['open']} — inconclusive" in said
    assert "accepted 1 candidate(s) for Apple-M1-Max-64GB/mlx: wrote" in said
    fresh = BaselineStore(tmp_path, "Apple-M1-Max-64GB")
    taken = fresh.lookup(decided)
    assert taken is not None
    assert taken.result.speedup == decided.speedup
    assert fresh.lookup(open_) is None
    assert main(["baselines", "accept", "--dir", str(tmp_path), "--accept-inconclusive", "[prose]"]) == 0
    assert BaselineStore(tmp_path, "Apple-M1-Max-64GB").lookup(open_) is not None
    assert not store.path("mlx", candidates=True).exists(), "accepted candidates leave the candidates file"


def test_report_renders_markdown_and_png_and_exits_1_on_a_flip(tmp_path: Path, sample_run: RunRecord) -> None:
    results = tmp_path / "results.json"
    results.write_text(dumps(sample_run))
    md, png = tmp_path / "out.md", tmp_path / "out.png"
    assert main(["report", str(results), "--md", str(md), "--png", str(png)]) == 1
    assert md.read_text().startswith("# pytest-specdec verdicts")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_of_several_results_files_keeps_each_files_summary_lines(tmp_path: Path, sample_run: RunRecord) -> None:
    first, second, md = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "out.md"
    first.write_text(dumps(replace(sample_run, summary=("a γ sweep's line",))))
    second.write_text(dumps(replace(sample_run, summary=("a context sweep's line",))))
    main(["report", str(first), str(second), "--md", str(md)])
    text = md.read_text()
    assert "- a γ sweep's line" in text
    assert "- a context sweep's line" in text
    sections = text.split("# pytest-specdec verdicts — ")[1:]
    assert [section.splitlines()[0] for section in sections] == [str(first), str(second)], "which file each row is from"
    assert "a γ sweep's line" in sections[0]
    assert "a context sweep's line" not in sections[0]


def test_report_reads_a_candidates_file(tmp_path: Path, make_record: Callable[..., ComparisonRecord]) -> None:
    """A candidates (or baselines) file is a store file, not a results file: rendered all the same."""
    store = BaselineStore(tmp_path, "M")
    record = make_record("code", 0.94, "holds", None)
    store.write("mlx", {baseline_key(record): BaselineEntry(record, Provenance.MEASURED, "2026-11-30")},
                candidates=True)  # fmt: skip
    md = tmp_path / "out.md"
    assert main(["report", str(store.path("mlx", candidates=True)), "--md", str(md)]) == 0
    text = md.read_text()
    assert "restore" not in text
    assert "0.94x" in text


def test_plot_history_from_a_real_history_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_record: Callable[..., ComparisonRecord]
) -> None:
    store = BaselineStore(tmp_path, "M")
    from pytest_specdec.store.nights import Night

    lines = [
        Night.of_record(make_record("code", s, "holds", None), "M", False, f"2026-11-0{i}")
        for i, s in enumerate((0.9, 1.2), 1)
    ]
    store.append_history(lines)
    out = tmp_path / "h.png"
    assert main(["plot-history", "--dir", str(tmp_path), "--out", str(out)]) == 0
    assert "2 results" in capsys.readouterr().out
    assert out.is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "missing.json"], "missing.json: no such file"),
        (["baselines", "show", "--dir", "nowhere", "x"], "no baseline under nowhere has a key containing 'x'"),
        (["plot-history", "--dir", "nowhere"], "no history under nowhere/history"),
    ],
)
def test_bad_input_is_one_line_on_stderr(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert message in err


def test_corrupt_results_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "r.json"
    bad.write_text('{"schema_version": 1, "comparisons": []}')
    assert main(["report", str(bad)]) == 2
    assert f"{bad}: field 'machine_class': field required" in capsys.readouterr().err


def test_second_session_waits_for_the_lock_then_gives_up_clearly(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    store = accepted_store(tmp_path, make_record)
    before = store.path("mlx").read_bytes()
    waiting = BaselineStore(tmp_path, "Apple-M1-Max-64GB", lock_timeout_s=0.2)
    with FileLock(str(tmp_path / "history" / ".specdec.lock")):
        record = make_record("prose", 1.0, "holds", None)
        with pytest.raises(SpecdecUsageError, match=r"is locked by another pytest-specdec session for over 0\.2 s"):
            waiting.write("mlx", {baseline_key(record): BaselineEntry(record, "measured", "now")})
    assert store.path("mlx").read_bytes() == before


def test_rewriting_the_same_entries_leaves_the_file_untouched(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    store = accepted_store(tmp_path, make_record)
    path = store.path("mlx")
    stamp = path.stat().st_mtime_ns
    entry = next(iter(store.load("mlx").entries.items()))
    assert store.write("mlx", dict([entry])) is None
    assert path.stat().st_mtime_ns == stamp
    text = path.read_text()
    assert text.endswith("}\n")
    assert json.loads(text)["schema_version"] == 3
    assert text == reviewable_json(json.loads(text)) + "\n", "sorted, an interval a line: a stable diff"
    assert not list(tmp_path.rglob("*.tmp")), "no temporary file is left behind"


def test_doctor_stops_at_its_overall_deadline_and_says_after_which_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A check that hangs where no request limit reaches (here: every backend's look) ends the doctor at its
    deadline with one line naming the last finding printed, never a silent wait."""
    import threading

    from pytest_specdec.cli import doctor
    from pytest_specdec.gate import init

    released = threading.Event()

    def hangs(*_: object) -> object:
        released.wait()  # never set before the doctor gives up: a check that never answers
        raise RuntimeError("released at the end of the test")

    monkeypatch.setattr(init, "look", hangs)
    monkeypatch.setattr(doctor, "DEADLINE_S", 3.0)
    try:
        status = main(["doctor"])
    finally:
        released.set()
    lines = capsys.readouterr().out.splitlines()
    assert status == 1
    assert lines[0].startswith("python 3."), "what was found before the hang is printed"
    assert lines[-1].startswith(f"! doctor: no answer within 3 s in all, after {lines[-2]!r} — stopped")


def test_doctor_says_what_is_here_and_what_to_do_one_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    """The selected backend decides the exit status; every other backend is optional and never an action."""
    status = main(["doctor"])  # mlx, the default, is installed here
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("python 3.")
    assert lines[1].startswith("machine ")
    assert any(line.startswith("environment: ") or line.startswith("note: environment: ") for line in lines)
    if platform.system() != "Darwin":  # nothing is read off a Mac, and the line says so rather than "fit"
        assert f"environment: {NOT_READ}" in lines
    assert any(line.startswith("disk: ") for line in lines)
    assert any(line.startswith(("load: quiet (load average ", "note: load: busy (")) for line in lines)
    (selected,) = [line for line in lines if "(selected)" in line]
    assert selected.startswith("mlx (selected): ready — in-process: mlx ")
    assert status == 0, "a correct [mlx] install is a correct install"
    assert not [line for line in lines if line.startswith("!")], "nothing to do for a backend nobody asked for"
    ollama = next(line for line in lines if "ollama:" in line)
    assert ollama.startswith("optional: ollama: ")
    simulated = next(line for line in lines if "simulated:" in line)  # every registered backend, what it lacks
    assert "no real model profile (seed or gemma) — no leg" in simulated
    assert "SD kinds: draft model (runs claim d)" in simulated
    if shutil.which("ollama") is None:
        status = main(["doctor", "--backend", "ollama"])
        lines = capsys.readouterr().out.splitlines()
        assert "! ollama (selected): no server answered — start it (ollama serve) or pass its URL" in lines
        assert status == 1
        assert any(line.startswith("optional: mlx: ") for line in lines)


def test_the_docs_name_the_command_that_cannot_clash_with_pypis_specdec() -> None:
    """PyPI's unrelated ``specdec`` (0.2.0, a speculative decoder) installs a ``specdec`` command: the docs say
    ``pytest-specdec``, which the wheel installs beside its ``specdec`` alias."""
    import re
    import tomllib

    repo = Path(__file__).resolve().parent.parent
    scripts = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["pytest-specdec"] == scripts["specdec"] == "pytest_specdec.cli:main"
    pages = [repo / "README.md", repo / "baselines" / "README.md", *sorted((repo / "docs").glob("*.md"))]
    # (a workflow's name, "Actions → specdec gate → Run workflow", is no command)
    bare = re.compile(r"(?<![-\w/.])specdec (backends|doctor|baselines|report|plot-history|claims|evidence|calibrate|"
                      r"gate|site|submit|validate|pytest|standin)\b(?! →)")  # fmt: skip
    found = [f"{page.name}: {m.group(0)}" for page in pages for m in bare.finditer(page.read_text(encoding="utf-8"))]
    assert found == []
    usage = subprocess.run(
        [sys.executable, "-m", "pytest_specdec.cli", "--help"], capture_output=True, text=True, check=True
    )
    assert usage.stdout.startswith("usage: pytest-specdec ")


@pytest.mark.parametrize(("chip", "cores", "said"), [
    ("Apple M5 Ultra", 80, "peak bandwidth 1228 GB/s (chips.toml: two M5 Max dies fused"),
    ("Apple M6", 10, "peak bandwidth 170 GB/s (chips.toml: the quoted figure of lpalbou/medium"),
    ("Apple M6 Max", 40, "peak bandwidth unknown (the chip is not in chips.toml"),
])  # fmt: skip
def test_doctor_on_a_mac_reads_its_chips_bandwidth_from_the_data_file(
    monkeypatch: pytest.MonkeyPatch, chip: str, cores: int, said: str
) -> None:
    """A faked Mac: sysctl and ioreg answer as macOS does (platform.system says Darwin)."""
    from pytest_specdec import hardware
    from pytest_specdec.cli.doctor import findings

    answers = {"machdep.cpu.brand_string": chip, "hw.memsize": str(64 * 2**30), "iogpu.wired_limit_mb": "0"}

    def run(command: list[str]) -> str:
        if command[0] == "sysctl":
            return answers.get(command[-1], "")
        return f'"gpu-core-count" = {cores}' if command[0] == "ioreg" else ""

    monkeypatch.setattr(hardware.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(hardware, "_run", run)
    hardware.machine_profile.cache_clear()
    try:
        lines = findings("simulated")
        next(lines)  # python
        machine, _ = next(lines)
    finally:
        hardware.machine_profile.cache_clear()
    assert machine.split(": ", 1)[1].startswith(f"{chip}, 69 GB"), machine
    assert said in machine


@pytest.mark.parametrize("command", [["backends"], ["evidence", "--machine", "Apple-M6-24GB"]])
def test_listing_commands_fit_an_80_column_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(command) == 0
    lines = capsys.readouterr().out.splitlines()
    too_wide = [line for line in lines if len(line) > 80 and "https://" not in line]  # a link is never broken
    assert too_wide == []
    assert len(lines) > 5
