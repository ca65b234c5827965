"""The CLI over its argument space (issue #51): malformed values, odd paths and wrong kinds of file give one line
and an exit status, never a traceback, and never change a stored baseline."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_specdec.cli import main

SHIPPED = Path(__file__).resolve().parents[1] / "baselines"
FOLDER = Path(__file__).resolve().parent  # any existing folder


def _store(root: Path) -> Path:
    """A copy of the shipped baselines, plus files of the wrong kind beside them."""
    store = root / "store"
    if not store.exists():
        shutil.copytree(SHIPPED, store)
        (store / "latin-1.json").write_bytes(b'{"caf\xe9": 1}')
        (store / "torn.json").write_text('{"entries": {')
        (store / "list.json").write_text("[1, 2, 3]")
        (store / "history").mkdir(exist_ok=True)
        (store / "history" / "broken.jsonl").write_text('{"key": 1}\n{torn')
    return store


def _snapshot(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def paths(store: Path, out: Path) -> st.SearchStrategy[str]:
    kinds = [
        str(store), str(store / "latin-1.json"), str(store / "torn.json"), str(store / "list.json"),
        str(store / "history" / "broken.jsonl"), str(store / "missing.json"), str(store / "torn.json" / "below.json"),
        str(FOLDER), "", "-", str(out / "written.png"), str(out / "written.md"), str(out / "no" / "folder.md"),
    ]  # fmt: skip
    return st.one_of(st.sampled_from(kinds), st.text(min_size=1, max_size=12).filter(lambda t: "\x00" not in t))


def commands(store: Path, out: Path) -> st.SearchStrategy[list[str]]:
    path, text = paths(store, out), st.text(max_size=12).filter(lambda t: "\x00" not in t)
    return st.one_of(
        st.tuples(st.just(["baselines", "list", "--dir"]), path).map(lambda c: [*c[0], c[1]]),
        st.tuples(st.just(["baselines", "list", "--machine"]), text, path).map(lambda c: [*c[0], c[1], "--dir", c[2]]),
        st.tuples(st.just(["baselines", "show"]), text, path).map(lambda c: [*c[0], c[1], "--dir", c[2]]),
        st.tuples(st.just(["baselines", "diff", "--dir"]), path).map(lambda c: [*c[0], c[1]]),
        st.tuples(st.just(["report"]), path, path).map(lambda c: [*c[0], c[1], "--md", c[2]]),
        st.tuples(st.just(["report"]), path, path).map(lambda c: [*c[0], c[1], "--png", c[2]]),
        st.tuples(st.just(["plot-history", "--dir"]), path, text, path).map(
            lambda c: [*c[0], c[1], "--match", c[2], "--out", c[3]]
        ),
        st.tuples(st.just(["claims", "--dir"]), path).map(lambda c: [*c[0], c[1]]),
        st.tuples(st.just(["evidence", "--dir"]), path, text).map(lambda c: [*c[0], c[1], "--machine", c[2]]),
        st.tuples(st.just(["calibrate", "--pairs"]), text).map(lambda c: [*c[0], c[1], "--backend", "nonexistent"]),
        st.tuples(st.just(["backends"]), text).map(lambda c: [*c[0], c[1]]),
    )


def test_every_bad_argument_is_one_line_and_the_store_is_unchanged(tmp_path_factory: object) -> None:
    root = Path(str(tmp_path_factory.mktemp("cli")))  # type: ignore[attr-defined]
    store, out = _store(root), root / "out"
    out.mkdir(exist_ok=True)
    before = _snapshot(store)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @example(["calibrate", "--pairs", "abc", "--backend", "nonexistent"])
    @example(["report", str(store / "torn.json"), "--md", str(store / "torn.json")])
    @example(["plot-history", "--dir", str(store), "--out", str(store / "torn.json")])
    @given(commands(store, out))
    def run(argv: list[str]) -> None:
        said_out, said_err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(said_out), contextlib.redirect_stderr(said_err):
            try:
                status = main(argv)
            except SystemExit as done:  # argparse: its usage line and one error line
                status = done.code if isinstance(done.code, int) else 2
        err = said_err.getvalue()
        assert "Traceback" not in err + said_out.getvalue(), argv
        errors = [line for line in err.splitlines() if line.startswith("pytest-specdec") and "error:" in line]
        assert len(errors) <= 1, (argv, err)
        if status not in (0, None):
            assert errors, (argv, status, err)
            # argparse's own refusal prints its usage block first (wrapped to the terminal), then its one line
            said = err.split("\n" + errors[0])[0] if err.startswith("usage:") else err.strip()
            assert err.startswith("usage:") or said == errors[0], (argv, err)
        assert _snapshot(store) == before, argv

    run()
