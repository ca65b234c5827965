"""The reaper kills a killed run's servers, and never a stranger: identity is pid, start time and our token."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_specdec.backends.server_process import TOKEN_VARIABLE, pid_dir, process_start, reap_orphans


def started_sleep(token: str | None = None) -> subprocess.Popen[bytes]:
    """``sleep 300`` in a session of its own, once it has really become ``sleep`` (after its exec)."""
    environment = {**os.environ, **({TOKEN_VARIABLE: token} if token else {})}
    child = subprocess.Popen(["sleep", "300"], start_new_session=True, env=environment)
    cmdline = Path(f"/proc/{child.pid}/cmdline")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and cmdline.exists() and not cmdline.read_bytes().startswith(b"sleep"):
        os.sched_yield()  # the fork has not exec'ed yet: its command line is still Python's
    return child


@pytest.fixture
def gone_owner() -> int:
    owner = subprocess.Popen([sys.executable, "-c", "pass"])
    owner.wait()  # a run that is gone
    return owner.pid


@pytest.fixture
def register() -> Iterator[object]:
    written: list[Path] = []

    def registering(pid: int, **entry: object) -> Path:
        folder = pid_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{pid}.json"
        path.write_text(json.dumps({"pid": pid, **entry}))
        written.append(path)
        return path

    yield registering
    for path in written:
        path.unlink(missing_ok=True)


def test_servers_of_a_killed_run_are_reaped_at_the_next_start(gone_owner: int, register) -> None:  # type: ignore[no-untyped-def]
    orphan = started_sleep("t0ken")
    path = register(orphan.pid, owner=gone_owner, started=process_start(orphan.pid), token="t0ken", command=["sleep"])
    assert orphan.pid in reap_orphans()
    assert orphan.wait(timeout=10) == -signal.SIGKILL
    assert not path.exists()


@pytest.mark.parametrize(
    "identity",
    [
        {"started": "1", "token": "t0ken"},  # the pid was reused: it started at another time
        {"token": "other"},  # the same start, but not our token in its environment
        {},  # a registration from before identities: never killed on its name alone
    ],
    ids=["reused-pid", "not-our-token", "no-identity"],
)
def test_a_process_that_is_not_ours_is_never_killed(gone_owner: int, register, identity: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    bystander = started_sleep("t0ken")
    entry = {"started": process_start(bystander.pid), **identity} if identity else {}
    path = register(bystander.pid, owner=gone_owner, command=["sleep", "300"], **entry)
    try:
        assert bystander.pid not in reap_orphans()
        assert bystander.poll() is None, "still running"
        assert not path.exists(), "the stale registration is dropped"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_server_of_a_run_still_going_is_left_alone(register) -> None:  # type: ignore[no-untyped-def]
    mine = started_sleep("t0ken")
    path = register(mine.pid, owner=os.getpid(), owner_started=process_start(os.getpid()),
                    started=process_start(mine.pid), token="t0ken")  # fmt: skip
    try:
        assert mine.pid not in reap_orphans()
        assert path.exists()
    finally:
        mine.kill()
        mine.wait()


SIGTERM_PROBE = """
import os, signal, sys
import coverage
from pytest_specdec.backends.server_process import interrupt_on_sigterm

mode = sys.argv[1]
if mode == "coverage":
    measuring = coverage.Coverage(data_file=None, config_file=False)
    measuring.config.sigterm = True
    measuring.start()
elif mode == "theirs":
    signal.signal(signal.SIGTERM, lambda *_: print("theirs", flush=True))
before = signal.getsignal(signal.SIGTERM)
restore = interrupt_on_sigterm()
try:
    os.kill(os.getpid(), signal.SIGTERM)
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM while the teardown runs
    print("second ignored", flush=True)
restore()
print("restored" if signal.getsignal(signal.SIGTERM) == before else "changed", flush=True)
"""


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("default", ["interrupted", "second ignored", "restored"]),
        (
            "coverage",
            ["interrupted", "second ignored", "restored"],
        ),  # coverage's `sigterm = true` would die and leave the servers
        ("theirs", ["theirs", "not interrupted", "restored"]),  # a handler the program set itself is its own
    ],
)
def test_sigterm_interrupts_the_run_unless_the_program_handles_it_itself(mode: str, said: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", SIGTERM_PROBE, mode], capture_output=True, text=True, check=False,
                          timeout=120, env={k: v for k, v in os.environ.items() if not k.startswith("COVERAGE")})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == said
