"""Every failure is one line, a nonzero exit, and a store that is whole: one fault-injection test per class."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from pytest_specdec.backends import require_runtime
from pytest_specdec.backends.base import BackendSpec, ModelPair
from pytest_specdec.backends.pool import BackendPool
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.cli import main
from pytest_specdec.config import build_settings
from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError
from pytest_specdec.store.baselines import BaselineStore
from pytest_specdec.store.files import write_atomically
from pytest_specdec.store.nights import read_nights
from pytest_specdec.store.records import ComparisonRecord, RunRecord

SIM = ("--backend=simulated", "--specdec-max-trials=4", "-p", "no:cacheprovider")
TEST = (
    "import pytest\n\n@pytest.mark.speedup(min=0.5)\ndef test_claim(specdec):\n    specdec.compare(category='code')\n"
)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, so a write can run out of space (needs root; skipped otherwise)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    command = ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)]
    done = subprocess.run(command, check=False, capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.decode().strip() or 'not root'})")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def fill(disk: Path) -> list[Path]:
    """Fill ``disk`` a page at a time until it is full; the files written."""
    fillers: list[Path] = []
    while True:
        fillers.append(disk / f"filler-{len(fillers)}")
        try:
            fillers[-1].write_bytes(b"\0" * 4096)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
            return fillers[:-1]


# More than a write buffer holds (8 KiB), and less: a buffered file keeps the short line in its
# buffer, and its rollback would flush it first onto the full disk.
@pytest.mark.parametrize(("padding", "room"), [(16_000, True), (6_000, False)])
def test_a_full_disk_during_the_history_append_leaves_no_torn_line(
    small_disk: Path, make_record: Callable[..., ComparisonRecord], padding: int, room: bool
) -> None:
    from dataclasses import replace

    from pytest_specdec.store.nights import Night

    store = BaselineStore(small_disk / "baselines", "M")
    night = Night.of_record(make_record("code", 1.0, "holds", None), "M", False, "2026-11-30")
    store.append_history([night])
    before = store.history_path().read_bytes()
    fillers = fill(small_disk)
    if room:
        fillers[0].unlink()  # room for part of the next line, not all of it (else only the last page's slack)
    with pytest.raises(OSError, match="No space left") as caught:
        store.append_history([replace(night, nodeid="x" * padding)])
    assert caught.value.errno == errno.ENOSPC
    assert store.history_path().read_bytes() == before, "rolled back to the previous size"
    assert len(read_nights(store.history_path())) == 1


def test_a_run_that_dies_while_writing_never_leaves_a_baseline_without_its_history(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """History is appended first: a failure there (a full disk, a kill) stops before any baseline is accepted."""
    from pytest_specdec.store.ledger import BaselineLedger, LedgerPolicy

    def dies(self: BaselineStore, lines: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(BaselineStore, "append_history", dies)
    book = BaselineLedger(BaselineStore(tmp_path, "M"), LedgerPolicy(update=True))
    book.check(make_record("code", 1.0, "holds", None))
    report = book.finish(interrupted=False, collected=None)
    assert report.error is not None
    assert "No space left" in report.error
    assert not (tmp_path / "M").exists(), "no baseline was accepted without its history line"


def test_a_torn_last_line_is_skipped_and_reported(tmp_path: Path, make_record: Callable[..., ComparisonRecord]) -> None:
    from pytest_specdec.store.nights import Night

    path = tmp_path / "history.jsonl"
    whole = json.dumps(Night.of_record(make_record("code", 1.0, "holds", None), "M", False, "t").as_line())
    path.write_text(whole + "\n" + whole[: len(whole) // 2])
    torn: list[str] = []
    assert len(read_nights(path, torn)) == 1
    assert torn == [f"{path}:2: a torn last line (an interrupted append) was skipped"]


def test_model_identity_is_read_when_the_backend_loads() -> None:
    class Shifting(SimulatedBackend):
        calls = 0

        def model_digest(self) -> str:
            Shifting.calls += 1
            return f"digest-{Shifting.calls}"

    def loader(name: str, pair: ModelPair, options: Mapping[str, str]) -> SimulatedBackend:
        return Shifting(pair, options)

    pool = BackendPool("simulated", ModelPair("t", "d"), {}, loader)
    backend = pool.backend()
    assert pool.digest(backend) == "digest-1"
    assert pool.digest(backend) == "digest-1", "files changed mid-run do not re-key the result"


def test_a_baseline_path_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "M" / "mlx.json").mkdir(parents=True)
    with pytest.raises(SpecdecUsageError, match=r"mlx.json is a directory, not a JSON file"):
        BaselineStore(tmp_path, "M").load("mlx")


@pytest.mark.parametrize(
    ("backend", "options"),
    [
        ("llama-server", {"plain_url": "http://127.0.0.1:abc", "sd_url": "http://127.0.0.1:1"}),
        ("mtplx", {"url": "http://127.0.0.1:abc"}),
    ],
)
def test_a_malformed_server_url_is_one_line(backend: str, options: dict[str, str]) -> None:
    from pytest_specdec.backends import load_backend

    with pytest.raises(SpecdecUsageError, match=r"is not a valid URL .*use http://HOST:PORT"):
        load_backend(backend, ModelPair("m"), options)


def test_a_backend_that_raises_mid_run_fails_its_test_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST)
    result = pytester.runpytest(*SIM, "--specdec-backend-option=crash_after=5")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*backend 'simulated' failed while measuring: RuntimeError: simulated library failure*"]
    )
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    assert not (pytester.path / "baselines" / "candidates").exists()


def test_an_exception_from_the_users_own_code_is_theirs_with_its_traceback(pytester: pytest.Pytester) -> None:
    """A prompt builder of the user's raising inside ``compare()``: a normal failure pointing at their file and
    line, never "backend failed", and the message said once."""
    pytester.makepyfile(
        myprompts="def build(category, kind):\n    table = {}\n    return table[category]\n",
        test_mine=(
            "import myprompts\nfrom pytest_specdec import session\n\n"
            "def test_mine(specdec, monkeypatch):\n"
            "    monkeypatch.setattr(session, 'prompts_for', myprompts.build)\n"
            "    specdec.compare(category='code')\n"
        ),
    )
    result = pytester.runpytest_subprocess(*SIM, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["myprompts.py:3: KeyError"])
    text = result.stdout.str()
    assert "failed while measuring" not in text
    assert "During handling of the above exception" not in text


def test_a_signal_while_the_content_is_encoded_leaves_no_temporary_file(tmp_path: Path) -> None:
    """Ctrl-C (or SIGTERM, which the plugin turns into one) landing while a large file is encoded: the temporary
    file was made before the encoding and the try that removes it, and stayed behind."""

    class Interrupted(str):
        def encode(self, *args: object, **kwargs: object) -> bytes:
            raise KeyboardInterrupt

    path = tmp_path / "baseline.json"
    path.write_text("{}\n")
    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, Interrupted("{}"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.json"]
    assert path.read_text() == "{}\n"


def test_ctrl_c_during_the_end_write_is_reported_and_leaves_whole_files(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST)
    pytester.makeconftest(
        "from pytest_specdec.store import ledger\n"
        "def interrupted(self):\n    raise KeyboardInterrupt\n"
        "ledger.BaselineLedger._write = interrupted\n"
    )
    result = pytester.runpytest_subprocess(*SIM)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["ERROR: interrupted while writing baselines and reports*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


@pytest.mark.parametrize(
    ("pyproject", "message"),
    [
        ({"drift_alpha": 0.0}, r"--specdec-drift-alpha 0 is outside \(0, 1\) — use e\.g\. 0\.01"),
        ({"drift_alpha": 1.5}, r"--specdec-drift-alpha 1\.5 is outside"),
        ({"drift_min_effect": 1.0}, r"--specdec-drift-min-effect 1 is outside \[0, 1\) — use e\.g\. 0\.05"),
    ],
)
def test_a_drift_setting_out_of_range_is_one_line(pyproject: dict[str, object], message: str) -> None:
    with pytest.raises(SpecdecUsageError, match=message):
        build_settings(lambda _: None, lambda _: None, {"backend": "simulated", **pyproject})


@pytest.mark.parametrize(
    ("pyproject", "message"),
    [
        ({"backend": "simulated", "simulated": "fast"}, r"must be a table \(\[tool.specdec.simulated\]"),
        ({"backend": "simulated", "simulated": {"options": ["speedup=2"]}}, r"options = .* must be a table"),
    ],
)
def test_wrong_typed_configuration_is_refused_not_ignored(pyproject: dict[str, object], message: str) -> None:
    with pytest.raises(SpecdecUsageError, match=message):
        build_settings(lambda _: None, lambda _: None, pyproject)


def test_atomic_writes_keep_the_file_mode_and_stale_temporaries_are_cleaned(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    from pytest_specdec.store.ledger import BaselineLedger, LedgerPolicy

    path = tmp_path / "M" / "mlx.json"
    write_atomically(path, "{}")
    path.chmod(0o644)
    write_atomically(path, "{}\n")
    assert path.stat().st_mode & 0o777 == 0o644
    stale = tmp_path / "M" / ".specdec-mlx.json.abc.tmp"
    stale.write_text("half")
    users = tmp_path / "M" / ".notes.tmp"  # a user's own hidden file: not ours to delete
    users.write_text("mine")
    for old in (stale, users):
        os.utime(old, (0, 0))
    path.unlink()
    book = BaselineLedger(BaselineStore(tmp_path, "M"), LedgerPolicy(update=True))
    book.check(make_record("code", 1.0, "holds", None))
    report = book.finish(interrupted=False, collected=None)
    assert not stale.exists()
    assert users.read_text() == "mine", "only files with our own prefix are removed"
    assert any("temporary file(s) left by an interrupted write" in line for line in report.lines)


def test_an_interrupted_run_says_so_in_its_results_json(tmp_path: Path) -> None:
    from pytest_specdec.config import Settings
    from pytest_specdec.session import SpecdecSession

    run = SpecdecSession.create(Settings(backend="simulated"), "M", tmp_path).run_record(interrupted=True)
    assert run.interrupted


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["baselines", "list", "--dir", "{tmp}/missing"], "no such baselines folder"),
        (["report", "{tmp}/r.json", "--png", "{tmp}/out.txt"], "must name a .png file"),
        (["gate", "confirm", "--backend", "mlx", "--out", "{tmp}"], "is not valid JSON"),
        (["gate", "summary", "--backend", "mlx", "--out", "{tmp}"], "is not valid JSON"),
        (["calibrate", "--backend", "simulated", "--pairs", "0"], "--pairs 0 is too few"),
        (["calibrate", "--backend", "simulated", "--pairs", "-3"], "--pairs -3 is too few"),
    ],
)
def test_cli_refusals_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "status.json").write_text('{"measurable": tr')  # truncated
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_a_runtime_older_than_the_code_needs_is_named_with_the_fix() -> None:
    spec = BackendSpec("x", "m:C", requires=("json",), extra="x", minimum={"pytest": "999.0"})
    with pytest.raises(BackendUnavailable, match=r"needs pytest >= 999.0, but .* is installed — run: pip install -U"):
        require_runtime(spec)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "{tmp}/empty.json"], "is not a pytest-specdec results or baseline file (it has no schema_version)"),
        (["report", "{golden}", "--md", "{tmp}"], "is a folder — name a file to write"),
        (["report", "{golden}", "--md", "{tmp}/missing/r.md"], "missing does not exist — create it first"),
    ],
)
def test_files_that_are_not_what_a_command_needs_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "empty.json").write_text("{}")
    golden = Path(__file__).parent / "render" / "golden" / "results.json"
    assert main([a.format(tmp=tmp_path, golden=golden) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    """``pytest-specdec evidence | head``: the reader went away before the first write."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "pytest_specdec.cli", "evidence"], stdout=write,
                              stderr=subprocess.PIPE, check=False)  # fmt: skip
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("--specdec-max-trials=0", "--specdec-max-trials 0 is below 2"),
        ("--specdec-distribution-samples=1", "--specdec-distribution-samples 1 is below 2 — *use the default 128"),
        ("--specdec-distribution-samples=1000000000000", "*distribution-samples 1000000000000 is above 4,096 — *"),
        ("--specdec-max-tokens=1000000000", "--specdec-max-tokens 1000000000 is above 131,072 — *"),
        ("--specdec-max-trials=10000000", "--specdec-max-trials 10000000 is above 100,000 — *"),
    ],
)
def test_a_count_below_two_is_named_by_its_option(pytester: pytest.Pytester, argument: str, message: str) -> None:
    pytester.makepyfile("def test_x(specdec):\n    specdec.compare(category='code')\n")
    result = pytester.runpytest("--backend=simulated", argument)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("num_draft=0", "compare(): num_draft=0 is below 1 — draft at least one token"),
        ("max_tokens=1", "compare(max_tokens=1) is outside 2..131072 — decode timing needs two tokens"),
        ("max_tokens=10**12", "compare(max_tokens=1000000000000) is outside 2..131072 — the limit the command line*"),
        ("max_tokens='64'", "compare(max_tokens='64') is not a whole number — e.g. max_tokens=32"),
        ("max_trials=2.5", "compare(max_trials=2.5) is not a whole number — e.g. max_trials=32"),
    ],
)
def test_bad_compare_arguments_fail_before_anything_runs_and_are_never_blamed_on_the_backend(
    pytester: pytest.Pytester, arguments: str, message: str
) -> None:
    pytester.makepyfile(f"def test_it(specdec):\n    specdec.compare('code', {arguments})\n")
    result = pytester.runpytest("--backend=simulated", "-p", "no:cacheprovider", "--specdec-json=run.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{message}* — no result was kept"])  # how the gate tells it from a refuted claim
    assert "failed while measuring" not in result.stdout.str()
    stored = json.loads((pytester.path / "run.json").read_text())
    assert stored["comparisons"] == [], "nothing was measured, nothing stored"
    assert [t["kind"] for t in stored["unmeasured"]] == ["refused"], "and the results say why, for the gate"


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("--specdec-columns=category,speed", "*--specdec-columns: unknown column 'speed' — choose from: *"),
        (
            "--specdec-plain-runtime=llama-ccp",
            "*unknown backend 'llama-ccp' — choose one of: * (--specdec-plain-runtime NAME)",
        ),
        ("--specdec-json=.", "*--specdec-json . is a folder — name a file in it*"),
    ],
)
def test_a_bad_option_is_one_line_before_anything_is_measured(
    pytester: pytest.Pytester, option: str, said: str
) -> None:
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.speedup(min=1.0)\ndef test_x(specdec):\n    specdec.compare(category='code')\n"
    )
    result = pytester.runpytest("--backend=simulated", option, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {said}"])
    assert "specdec code: pair" not in result.stdout.str(), "nothing was measured"
    assert not (pytester.path / "missing").exists(), "no folder is made behind the user's back"


HISTORY = Path(__file__).parent.parent / "baselines" / "history" / "NVIDIA-H200.jsonl"


@pytest.mark.parametrize(
    "damage",
    [
        {"key": None},
        {"machine_class": None},
        {"time": None},
        {"verdict": None},
        {"speedup": {"estimate": 1.0}},
        {"speedup": None},
        {"bounds": [1]},
    ],
    ids=["no-key", "no-machine", "no-time", "no-verdict", "partial-speedup", "null-speedup", "bounds-list"],
)
@pytest.mark.parametrize("command", ["claims", "plot-history", "evidence"])
def test_a_history_line_with_only_some_fields_is_one_line_for_every_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: dict[str, object], command: str
) -> None:
    line = json.loads(HISTORY.read_text(encoding="utf-8").splitlines()[0])
    line.update(damage)
    line = {k: v for k, v in line.items() if v is not None or k == "speedup"}
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "M.jsonl").write_text(json.dumps(line) + "\n")
    argv = {"claims": ["claims", "--dir", str(tmp_path)],
            "plot-history": ["plot-history", "--dir", str(tmp_path), "--out", str(tmp_path / "h.png")],
            "evidence": ["evidence", "--dir", str(tmp_path), "--machine", "M",  # its history: the black points
                         "--plot", str(tmp_path / "e.png")]}[command]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a pytest-specdec history line" in err
    assert len(err.splitlines()) == 1


def test_an_unbounded_interval_is_stored_as_standard_json_and_read_back(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord], sample_run: RunRecord
) -> None:
    """Two pairs on two prompts leave no degrees of freedom: the interval is unbounded, and no file says Infinity."""
    from dataclasses import replace

    from pytest_specdec.stats import Interval
    from pytest_specdec.store.files import dumps, load_run
    from pytest_specdec.store.nights import Night

    record = make_record("code", 1.0, "inconclusive", None)
    record = replace(record, speedup=Interval(1.0, 0.0, float("inf"), 0.98, 2))
    store = BaselineStore(tmp_path, "M")
    store.append_history([Night.of_record(record, "M", False, "2026-12-01")])
    text = store.history_path().read_text()
    assert "Infinity" not in text
    assert json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON: {name}"))
    assert read_nights(store.history_path())[0].speedup.high == float("inf")
    run = replace(sample_run, comparisons=(record,))
    (tmp_path / "run.json").write_text(dumps(run))
    assert "Infinity" not in (tmp_path / "run.json").read_text()
    assert load_run(tmp_path / "run.json").comparisons[0].speedup.high == float("inf")


def test_a_history_line_of_a_newer_release_still_counts(tmp_path: Path) -> None:
    """An axis this release does not know (a newer release wrote the line) and a non-finite pair count: the line
    is read, the unknown axis left out, and nothing else in the file is lost."""
    base = {"time": "2026-12-01", "machine_class": "M", "backend": "mlx", "release": "r", "key": "k", "nodeid": "n",
            "category": "code", "verdict": "holds", "speedup": {"estimate": 1.2, "low": 1.1, "high": 1.3}}  # fmt: skip
    lines = [base | {"conditions": {"num_draft": 3, "from_the_future": 7}},
             base | {"speedup": {"estimate": 1.2, "low": 1.1, "high": 1.3, "n": "inf"}}]  # fmt: skip
    path = tmp_path / "M.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    first, second = read_nights(path)
    assert first.conditions.dump() == {"num_draft": 3}
    assert second.speedup.n == 0


def test_an_unrelated_tests_marker_and_a_session_without_specdec_tests_touch_nothing(pytester: pytest.Pytester) -> None:
    """A user's own ``concurrency`` marker is not the plugin's, and a session without a specdec test writes no
    file (not even the store's lock)."""
    pytester.makepyfile(
        'import pytest\n\n@pytest.mark.concurrency("serial")\ndef test_unit():\n    assert 1 + 1 == 2\n'
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    ours = [p for p in pytester.path.rglob("*") if "baselines" in p.parts or p.name.startswith(".specdec")]
    assert ours == [], "no baselines folder, lock or history"


def test_a_library_frame_without_a_file_is_not_the_users_code() -> None:
    """A dataclass's generated ``__init__`` ("<string>") or a template's frame is a library's, not the user's."""
    from pytest_specdec.fixture import raised_in_user_code

    namespace: dict[str, object] = {}
    exec("def fail():\n    raise ValueError('inside a library')\n", namespace)
    with pytest.raises(ValueError, match="inside a library") as caught:
        namespace["fail"]()  # type: ignore[operator]
    below_this_test = caught.value.with_traceback(caught.tb.tb_next)  # as _measure sees it: from the call down
    assert not raised_in_user_code(below_this_test)
