"""``pytest-specdec submit`` and ``pytest-specdec validate`` on a real run of the shipped benchmarks: what is shared, what is
refused, and one line per reason for each way a file can be tampered with."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_specdec.community.checks import check_file, recomputed_speedup
from pytest_specdec.store.submissions import read_submission

ROOT = Path(__file__).resolve().parents[2]
SPECDEC = [sys.executable, "-m", "pytest_specdec.cli"]
PLANTED_USER = "zqxowner"
PLANTED_HOST = "zqx-macbook-pro"


def bench_arguments() -> list[str]:
    """``make bench``'s pytest arguments as the Makefile has them, on the one claim file mlx answers fastest."""
    recipe = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "-m pytest benchmarks/" in line)
    words = shlex.split(recipe.split("-m pytest", 1)[1])
    return ["benchmarks/test_claim_d_mlx_draft.py" if w == "benchmarks/" else w for w in words]


@pytest.fixture(scope="module")
def bench_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results file written by make bench's own flags (its ``--specdec-json`` redirected), real mlx."""
    out = tmp_path_factory.mktemp("bench")
    words = [w for w in bench_arguments() if not w.startswith("--specdec-json=")]
    assert len(words) < len(bench_arguments()), "make bench no longer keeps its results: nothing to submit"
    command = [sys.executable, "-m", "pytest", *words, f"--specdec-json={out / 'bench-results.json'}",
               f"--specdec-baselines={out / 'baselines'}"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return out / "bench-results.json"


def planted(results: Path, home: Path, into: Path) -> Path:
    """The results file as if measured by ``PLANTED_USER`` on ``PLANTED_HOST``, its paths under ``home``."""
    data = json.loads(results.read_text())
    data["machine_info"]["node"] = PLANTED_HOST
    data["machine_info"]["user"] = PLANTED_USER
    data["commit_info"] = {"project": "mine", "branch": f"{PLANTED_USER}/work", "dirty": True}
    data["command"] += [f"--specdec-json={home}/runs/r.json"]
    for c in data["comparisons"]:
        c["target"] = f"{home}/models/target.gguf"
        c["notes"].append(f"loaded {home}/models/target.gguf on {PLANTED_HOST} as {PLANTED_USER}")
        c["device"] = f"cpu of {PLANTED_HOST}"
    into.write_text(json.dumps(data))
    return into


def run_specdec(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SPECDEC, *args], cwd=cwd, capture_output=True, text=True, check=False, env=env)


@pytest.fixture(scope="module")
def submitted(bench_results: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """``pytest-specdec submit`` run as the planted user, in an empty folder: (the folder, its output, the home)."""
    base = tmp_path_factory.mktemp("submit")
    home = base / "Users" / PLANTED_USER
    home.mkdir(parents=True)
    results = planted(bench_results, home, base / "results.json")
    env = dict(os.environ, HOME=str(home), USER=PLANTED_USER, LOGNAME=PLANTED_USER)
    done = run_specdec("submit", str(results), "--repository", "ada/pytest-specdec", "--out", str(base / "out"),
                       cwd=base, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return base / "out", done.stdout, home


def test_a_submitted_file_names_no_user_host_or_home(submitted: tuple[Path, str, Path]) -> None:
    out, printed, home = submitted
    files = sorted(out.rglob("*.*"))
    assert {p.suffix for p in files} == {".json", ".md"}
    assert len(files) >= 2
    url = next(line for line in printed.splitlines() if "https://github.com/ada/pytest-specdec/issues/new?" in line)
    for text in [url, *(p.read_text() for p in files)]:
        for secret in (PLANTED_USER, PLANTED_HOST, str(home)):
            assert secret.lower() not in text.lower()
    shared = read_submission(next(p for p in files if p.suffix == ".json"))
    assert shared.comparison.target == "target.gguf"  # a model path keeps only its name
    assert "~/runs/r.json" in shared.command
    assert "machine.chip" in printed
    memory = f"{round(psutil.virtual_memory().total / 2**30)} GB"  # a Linux class names no memory: the run kept it
    for summary in (p.read_text() for p in files if p.suffix == ".md"):
        assert f"({memory})" in summary.splitlines()[0], summary
        assert f"{memory} memory" in summary
    assert "comparison.samples[].drafted" in printed


def test_a_submission_from_make_bench_validates(submitted: tuple[Path, str, Path]) -> None:
    out, _, _ = submitted
    for path in sorted(out.rglob("*.json")):
        result = check_file(path)
        assert result.accepted, result.reasons
        assert any("measured at all" in line for line in result.unchecked)
        assert path.parent.name == read_submission(path).machine.machine_class  # community/<machine class>/


def tampered(path: Path, change: Callable[[dict[str, Any]], None], into: Path) -> Path:
    data = json.loads(path.read_text())
    change(data["comparison"])
    into.write_text(json.dumps(data))
    return into


def _edit_interval(c: dict[str, Any]) -> None:
    c["speedup"]["low"] *= 1.1


def _drop_pairs(c: dict[str, Any]) -> None:
    c["samples"] = c["samples"][:-2]


def _impossible(c: dict[str, Any]) -> None:
    """Every SD rate ×8, the SD arm's and the interval with them: all consistent but the counts."""
    c["treatment_tps"] *= 8
    for s in c["samples"]:
        s["treatment_tps"] *= 8
    for side in ("estimate", "low", "high"):
        c["speedup"][side] *= 8


def _never_drafted(c: dict[str, Any]) -> None:
    for s in c["samples"]:
        s["drafted"] = s["accepted"] = 0


def _big_target(c: dict[str, Any]) -> None:
    c["scope"]["target_bytes"] = "big"


def _many_prompts(c: dict[str, Any]) -> None:
    c["scope"]["prompt_count"] = "many"


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (_edit_interval, "is not the one its pairs give"),
        (_drop_pairs, "pairs were dropped or added"),
        (_impossible, "tokens per target pass its own draft counts allow"),
        (_never_drafted, "SD never drafted"),
        (_big_target, "scope 'target_bytes' is 'big', not a whole number"),
        (_many_prompts, "scope 'prompt_count' is 'many', not a whole number"),
    ],
    ids=[
        "interval edited",
        "pairs dropped",
        "impossible speedup",
        "never drafted",
        "size not a number",
        "prompt count not a number",
    ],
)
def test_a_tampered_file_is_rejected_with_its_reason(
    submitted: tuple[Path, str, Path], tmp_path: Path, change: Callable[[dict[str, Any]], None], line: str
) -> None:
    original = next(iter(sorted(submitted[0].rglob("*.json"))))
    path = tampered(original, change, tmp_path / "tampered.json")
    done = run_specdec("validate", str(original), str(path), cwd=tmp_path)
    assert done.returncode == 1
    rejected = [x for x in done.stdout.splitlines() if x.startswith(f"{path}: rejected: ")]
    assert rejected, done.stdout
    assert line in rejected[0], done.stdout
    assert not [x for x in done.stdout.splitlines() if x.startswith(f"{original}: rejected")]
    assert done.stdout.rstrip().endswith("1 consistent, 1 rejected")


def test_the_impossible_file_is_consistent_but_for_its_counts(
    submitted: tuple[Path, str, Path], tmp_path: Path
) -> None:
    """The tampering that rescales rates and interval together passes every check the counts do not decide."""
    original = next(iter(sorted(submitted[0].rglob("*.json"))))
    path = tampered(original, _impossible, tmp_path / "impossible.json")
    submission = read_submission(path)
    again, stated = recomputed_speedup(submission.comparison), submission.comparison.speedup
    assert again.estimate == pytest.approx(stated.estimate, rel=1e-9)
    assert len(check_file(path).reasons) == 1


@pytest.mark.parametrize("machine", ["../../outside/x", "/tmp/absolute"])
def test_a_machine_class_that_is_not_a_plain_name_is_never_a_path(
    bench_results: Path, submitted: tuple[Path, str, Path], tmp_path: Path, machine: str
) -> None:
    """``pytest-specdec submit`` builds ``community/<machine class>/`` from the results file: a class that climbs out of
    ``--out`` (or is absolute) is one line and nothing is written; ``validate`` refuses such a submission too."""
    data = json.loads(bench_results.read_text())
    data["machine_class"] = machine
    hostile = tmp_path / "work" / "results.json"
    hostile.parent.mkdir()
    hostile.write_text(json.dumps(data))
    done = run_specdec("submit", str(hostile), "--repository", "a/b", "--out", str(tmp_path / "work" / "out"),
                       cwd=tmp_path / "work")  # fmt: skip
    assert done.returncode == 2, done.stdout
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "is not a plain name" in done.stderr
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["results.json"], "nothing written"
    original = next(iter(sorted(submitted[0].rglob("*.json"))))
    moved = json.loads(original.read_text())
    moved["machine"]["machine_class"] = machine
    (tmp_path / "moved.json").write_text(json.dumps(moved))
    checked = run_specdec("validate", str(tmp_path / "moved.json"), cwd=tmp_path)
    assert checked.returncode == 1
    assert "is not a plain name" in checked.stdout + checked.stderr


def test_not_a_submission_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"schema_version": 3, "comparisons": []}')
    done = run_specdec("validate", str(tmp_path / "x.json"), cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "is not a pytest-specdec submission" in done.stdout
    missing = run_specdec("submit", str(tmp_path / "none.json"), "--repository", "o/n", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1
    assert "no such file" in missing.stderr
    bad = run_specdec("submit", str(tmp_path / "x.json"), "--repository", "not a repo", cwd=tmp_path)
    assert bad.returncode == 2
    assert "owner/name" in bad.stderr


def a_fork(tmp_path: Path) -> Path:
    """A checkout of a fork of pytest-specdec (its origin on GitHub), one empty commit on main."""
    checkout = tmp_path / "fork"
    checkout.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for step in (["init", "-q", "-b", "main"], ["remote", "add", "origin", "git@github.com:ada/pytest-specdec.git"],
                 ["commit", "-q", "--allow-empty", "-m", "start"]):  # fmt: skip
        subprocess.run([*git, *step], cwd=checkout, check=True)
    return checkout


def test_pr_prepares_a_branch_that_adds_the_files(bench_results: Path, tmp_path: Path) -> None:
    checkout = a_fork(tmp_path)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org")  # fmt: skip
    done = run_specdec("submit", str(bench_results), "--pr", cwd=checkout, env=env)
    assert done.returncode == 0, done.stderr
    assert "issues/new?" in done.stdout
    assert "github.com/ada/pytest-specdec" in done.stdout
    branch = subprocess.run(
        ["git", "branch", "--show-current"], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout
    assert branch.startswith("submit/")
    added = subprocess.run(
        ["git", "show", "--name-only", "--format="], cwd=checkout, capture_output=True, text=True, check=True
    )
    names = added.stdout.split()
    assert names
    assert all(n.startswith("community/") for n in names)
    assert {Path(n).suffix for n in names} == {".json", ".md"}
    assert f"git push -u origin {branch.strip()}" in done.stdout


def test_pr_whose_commit_fails_takes_its_files_and_branch_back(bench_results: Path, tmp_path: Path) -> None:
    """A git error after the files were written (here: no identity to commit with) leaves nothing behind."""
    checkout = a_fork(tmp_path)
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env |= {"HOME": str(tmp_path), "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "user.useConfigOnly", "GIT_CONFIG_VALUE_0": "true"}  # fmt: skip
    done = run_specdec("submit", str(bench_results), "--pr", cwd=checkout, env=env)
    assert done.returncode != 0
    assert "the submission's files were taken back, nothing committed" in done.stderr
    assert "Traceback" not in done.stderr
    left = [p for p in (checkout / "community").rglob("*") if p.is_file()] if (checkout / "community").exists() else []
    assert left == [], "the written files were removed"
    current = subprocess.run(["git", "branch", "--show-current"], cwd=checkout, capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
    assert current == "main"
    branches = subprocess.run(["git", "branch", "--list", "submit/*"], cwd=checkout, capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
    assert branches == ""


def test_evidence_lists_consistent_submissions_as_paired_and_leaves_out_rejected_ones(
    submitted: tuple[Path, str, Path], tmp_path: Path
) -> None:
    community = tmp_path / "community"
    shutil.copytree(submitted[0] / "community", community)
    original = next(iter(sorted(community.rglob("*.json"))))
    tampered(original, _never_drafted, original.with_name("never-drafted.json"))
    done = run_specdec("evidence", "--community", str(community), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = done.stdout.split("submitted to", 1)[1]
    consistent = len(list(community.rglob("*.json"))) - 1
    assert f"(paired measurements; submitted, not reproduced): {consistent} consistent" in listed
    assert "(1 file(s) left out: pytest-specdec validate rejects them)" in listed
    assert read_submission(original).comparison.release in listed
