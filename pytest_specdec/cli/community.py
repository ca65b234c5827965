"""``pytest-specdec submit RESULTS.json`` and ``pytest-specdec validate FILE…``: share a result, and check one from the file alone."""

from __future__ import annotations

import argparse
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_specdec.errors import SpecdecUsageError

GITHUB_REMOTE = re.compile(r"github\.com[:/]([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")


def register(commands: Any) -> None:
    """Add the ``submit`` and ``validate`` sub-commands."""
    submit = commands.add_parser(
        "submit", help="a results file as shareable submissions: files, a summary, an issue URL"
    )
    submit.add_argument(
        "results", type=Path, help="a --specdec-json results file (make bench writes bench-results.json)"
    )
    submit.add_argument("--out", type=Path, default=Path("."),
                        help="where community/<machine class>/ is written (default: here)")  # fmt: skip
    submit.add_argument("--pr", action="store_true",
                        help="in this git checkout: a branch that adds the files, committed, for a pull request")  # fmt: skip
    submit.add_argument("--repository", help="owner/name on GitHub for the issue URL (default: this checkout's origin)")
    submit.set_defaults(handler=_submit)
    check = commands.add_parser("validate", help="check submitted files from the files alone (nothing is run)")
    check.add_argument("files", type=Path, nargs="+", help="submission files (community/<machine class>/*.json)")
    check.set_defaults(handler=_validate)


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SpecdecUsageError(f"git {' '.join(args)}: {(done.stderr or done.stdout).strip().splitlines()[-1]}")
    return done.stdout.strip()


def _repository(args: argparse.Namespace) -> str:
    if args.repository:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", args.repository):
            raise SpecdecUsageError(
                f"--repository {args.repository!r} is not owner/name — e.g. --repository ada/pytest-specdec"
            )
        return str(args.repository)
    try:
        origin = _git("remote", "get-url", "origin", cwd=Path.cwd())
    except (SpecdecUsageError, OSError):
        origin = ""
    found = GITHUB_REMOTE.search(origin)
    if found is None:
        raise SpecdecUsageError(
            "no GitHub repository to file the result with: this folder has no github.com origin — give --repository "
            "OWNER/NAME (the pytest-specdec repository you submit to)"
        )
    return found.group(1)


def _submit(args: argparse.Namespace) -> int:
    from pytest_specdec.community.checks import check_submission
    from pytest_specdec.community.submit import (
        Private,
        field_names,
        free_text,
        issue_url,
        leaks,
        markdown,
        submissions_of,
    )
    from pytest_specdec.store.files import dumps, load_run, write_atomically

    repository = _repository(args)  # bad input is refused before anything is written
    run = load_run(args.results)
    private = Private.here(*(str(run.machine_info.get(k)) for k in ("node",) if run.machine_info.get(k)))
    submitted = datetime.now(UTC).replace(microsecond=0).isoformat()
    made, skipped = submissions_of(run, private, submitted)
    for line in skipped:
        print(f"specdec submit: left out {line}")
    kept = []
    for submission in made:  # what specdec validate would reject is never shared
        reasons = check_submission(submission, "").reasons
        c = submission.comparison
        if reasons:
            print(f"specdec submit: left out {c.nodeid} [{c.category}]: specdec validate rejects it: {reasons[0]}")
        else:
            kept.append(submission)
    if not kept:
        raise SpecdecUsageError(
            f"{args.results}: no comparison in it can be submitted — run make bench (or your tests) again"
        )
    url = issue_url(kept, repository)
    for submission in kept:  # never written: scrubbing missed something
        found = leaks(free_text(submission), private, anywhere=[dumps(submission), markdown(submission), url])
        if found:
            raise SpecdecUsageError(
                f"a submission still names {found[0]!r} after scrubbing — report this; nothing written"
            )
    try:  # each machine class and backend names a folder and a file: plain names, checked before any write
        places = [submission.relative_path for submission in kept]
    except SpecdecUsageError as error:
        raise SpecdecUsageError(f"{args.results}: {error} — nothing written") from None
    root = _checkout(args) if args.pr else args.out
    written = []
    for submission, place in zip(kept, places, strict=True):
        path = root / place
        write_atomically(path, dumps(submission))
        write_atomically(path.with_suffix(".md"), markdown(submission) + "\n")
        written.append(path)
    print(f"specdec submit: {len(written)} file(s), each with a .md summary:")
    for path in written:
        print(f"  {path}")
    print("each file holds these fields (user paths, host and user names, other machines' addresses stripped):")
    print("  " + ", ".join(field_names(kept[0])))
    print(f"open an issue with the summary (attach the files): {url}")
    if args.pr:
        branch = _commit(root, written, kept[0].machine.machine_class, submitted)
        print(f"branch {branch} adds them; push it and open the pull request with your own tools:")
        print(f"  git push -u origin {branch} && gh pr create --repo {repository} --fill")
    return 0


def _checkout(args: argparse.Namespace) -> Path:
    cwd = Path.cwd()
    top = Path(_git("rev-parse", "--show-toplevel", cwd=cwd))
    if _git("status", "--porcelain", "--", "community", cwd=top):
        raise SpecdecUsageError(f"{top / 'community'} has uncommitted changes — commit or stash them before --pr")
    return top


def _commit(top: Path, written: list[Path], machine_class: str, submitted: str) -> str:
    """A branch that adds ``written``; on a git error the files and the branch are taken back (one line)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", machine_class).strip(".-") or "machine"
    branch = f"submit/{name}-{submitted[:19].replace(':', '').replace('-', '')}"
    before = _git("rev-parse", "--abbrev-ref", "HEAD", cwd=top).strip()
    try:
        _git("check-ref-format", "--branch", branch, cwd=top)
        _git("switch", "-c", branch, cwd=top)
        for path in written:
            _git("add", "--", str(path), str(path.with_suffix(".md")), cwd=top)
        _git("commit", "-m", f"Submit {len(written)} result(s) from {machine_class}", cwd=top)
    except SpecdecUsageError as error:
        for path in written:  # nothing of the submission is left behind
            subprocess.run(["git", "rm", "-q", "--cached", "--ignore-unmatch", "--", str(path),
                            str(path.with_suffix(".md"))], cwd=top, capture_output=True, check=False)  # fmt: skip
            path.unlink(missing_ok=True)
            path.with_suffix(".md").unlink(missing_ok=True)
        if _git("rev-parse", "--abbrev-ref", "HEAD", cwd=top).strip() == branch:
            subprocess.run(["git", "switch", "-q", before], cwd=top, capture_output=True, check=False)
            subprocess.run(["git", "branch", "-q", "-D", branch], cwd=top, capture_output=True, check=False)
        raise SpecdecUsageError(f"{error} — the submission's files were taken back, nothing committed") from None
    return branch


def _validate(args: argparse.Namespace) -> int:
    from pytest_specdec.community.checks import check_file

    rejected = 0
    for path in args.files:
        result = check_file(path)
        if result.accepted:
            print(f"{path}: consistent (submitted, not reproduced)")
        else:
            rejected += 1
            for reason in result.reasons:
                print(f"{path}: rejected: {reason}")
        for line in result.flags:
            print(f"{path}: flagged (not rejected): {line}")
        for line in result.unchecked:
            print(f"{path}: not checked: {line}")
    print(f"specdec validate: {len(args.files) - rejected} consistent, {rejected} rejected")
    return 1 if rejected else 0
