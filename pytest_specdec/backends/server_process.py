"""Server programs the plugin starts itself: ``llama-server`` per arm, ``ollama serve``.

A :class:`ServerProcess` gets a free loopback port, runs its command in a process
group of its own with stdout and stderr in a log file, and is ready when
``GET ready_path`` answers 200 (llama-server answers 503 while it loads the model).
A process that exits before it is ready, or never gets ready, is one line naming the
program and the last line it logged. :meth:`~ServerProcess.stop` ends the whole group
(SIGTERM, then SIGKILL) and removes the log of a server that ran cleanly.

A pytest run that is killed (SIGKILL, a closed terminal) cannot stop its servers, and
they would keep a model in memory. So every start writes a pid file under
``<cache>/servers/``; the next start reaps the groups whose owning process is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_specdec.embedded.models import cache_root
from pytest_specdec.errors import BackendUnavailable

READY_TIMEOUT_S = 120.0
# A folder for every managed server's log, kept after a clean stop (the CI gate puts them
# in its artifact); unset: logs go to the cache and are removed when a server ran cleanly.
LOG_FOLDER_VARIABLE = "SPECDEC_SERVER_LOGS"
# A token in each managed server's environment: the reaper kills only a process that carries it
# (and started when the registration says), never one that merely has the same program name.
TOKEN_VARIABLE = "SPECDEC_SERVER_TOKEN"
# llama-server can hang on SIGTERM in the middle of a non-streaming request; do not wait long.
STOP_TIMEOUT_S = 3.0


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C is (:func:`interrupt_on_sigterm`): a parent that runs a child of its own forwards
    it, since unlike a terminal's Ctrl-C it reached this process alone."""


def interrupt_on_sigterm() -> Callable[[], None]:
    """Let SIGTERM end this process as Ctrl-C does, so the same teardown stops every managed server and worker
    (by default SIGTERM ends Python at once and they outlive it); returns what puts the old handler back.

    The first SIGTERM raises :class:`Terminated`; later ones are ignored while the teardown runs. Only on the
    main thread (signals are set there), and only where SIGTERM has its default action or
    coverage's handler (``[run] sigterm = true``: it saves its data and dies the default way, leaving the servers;
    the interrupted run exits normally, so coverage saves at exit all the same). Any other handler is its owner's.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)
    if previous != signal.SIG_DFL and not _saves_coverage(previous):
        return lambda: None

    def interrupt(signum: int, _frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one never cuts the teardown short (SIGKILL still)
        raise Terminated(f"signal {signum} (SIGTERM)")

    signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def _saves_coverage(handler: object) -> bool:
    """Whether ``handler`` is coverage.py's SIGTERM handler (a method of its ``Coverage`` object)."""
    owner = getattr(handler, "__self__", None)
    return type(owner).__module__.split(".")[0] == "coverage" and getattr(handler, "__name__", "") == "_on_sigterm"


def free_port() -> int:
    """A port nothing listens on right now (127.0.0.1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pid_dir() -> Path:
    """Where running managed servers are registered."""
    return cache_root() / "servers"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int) -> str | None:
    """When ``pid`` started, as the system says (a reused pid has another start): None when it is gone."""
    stat = Path(f"/proc/{pid}/stat")
    if stat.parent.parent.joinpath("self").exists():  # Linux: field 22 of /proc/PID/stat, in clock ticks
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[19]
        except (OSError, IndexError):
            return None
    done = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None  # macOS: no /proc


def _carries_token(pid: int, token: str) -> bool | None:
    """Whether ``pid``'s environment holds our token (None: the system does not let us read it)."""
    environ = Path(f"/proc/{pid}/environ")
    try:
        return f"{TOKEN_VARIABLE}={token}".encode() in environ.read_bytes().split(b"\0")
    except OSError:
        pass
    done = subprocess.run(["ps", "eww", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False)
    return f"{TOKEN_VARIABLE}={token}" in done.stdout if done.returncode == 0 and done.stdout else None


def _ours(pid: int, entry: Mapping[str, object]) -> bool:
    """Whether ``pid`` is still the server we started: its start time and our token, never its name alone."""
    started, token = entry.get("started"), entry.get("token")
    if not isinstance(started, str) or not isinstance(token, str) or process_start(pid) != started:
        return False
    return _carries_token(pid, token) is not False


def reap_orphans(folder: Path | None = None) -> list[int]:
    """Kill the process groups of managed servers whose owning run is gone; their pids."""
    folder = folder or pid_dir()
    reaped: list[int] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            pid, owner = int(entry["pid"]), int(entry["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        owner_started = entry.get("owner_started")
        if _alive(owner) and (owner_started is None or process_start(owner) == owner_started):
            continue  # the run that started it is still going
        if _alive(pid) and _ours(pid, entry):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            reaped.append(pid)
        path.unlink(missing_ok=True)
    return reaped


class ServerProcess:
    """One server program on a loopback port, from start to stop."""

    def __init__(
        self,
        name: str,
        command: Callable[[int], Sequence[str]],
        *,
        ready_path: str = "/health",
        environment: Mapping[str, str] | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
        port: int | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.name = name
        self._command = command
        self.ready_path = ready_path
        self.environment = dict(environment or {})
        self.ready_timeout_s = ready_timeout_s
        self.port = port
        kept = os.environ.get(LOG_FOLDER_VARIABLE, "")
        self._log_dir = log_dir or (Path(kept) if kept else None)
        self._keep_logs = bool(kept)
        self.log_path: Path | None = None
        self.command: list[str] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._token = ""

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> ServerProcess:
        """Start the program and wait until it is ready; one line when it cannot be."""
        reap_orphans()
        self.port = self.port or free_port()
        self.command = [str(part) for part in self._command(self.port)]
        log_dir = self._log_dir or pid_dir()
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{self.name}-{self.port}.log"
        self._token = secrets.token_hex(8)
        with self.log_path.open("wb") as log:
            try:
                self._process = subprocess.Popen(
                    self.command,
                    env={**os.environ, **self.environment, TOKEN_VARIABLE: self._token},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as error:
                raise BackendUnavailable(
                    f"cannot start {self.name} ({self.command[0]}): {error.strerror or error}"
                ) from None
        if _SCOPES:
            _SCOPES[-1].add(self)
        try:
            self._register()
            self._wait_until_ready()
        except BaseException:  # Ctrl-C or SIGTERM while it loads: nothing owns it yet, so stop it here
            if self.running:
                self.stop(keep_log=True)
            raise
        return self

    def _register(self) -> None:
        assert self._process is not None
        folder = pid_dir()
        folder.mkdir(parents=True, exist_ok=True)
        entry = {
            "pid": self._process.pid, "owner": os.getpid(), "owner_started": process_start(os.getpid()),
            "started": process_start(self._process.pid), "token": self._token, "name": self.name,
            "command": self.command,
        }  # fmt: skip
        (folder / f"{self._process.pid}.json").write_text(json.dumps(entry), encoding="utf-8")

    def log_text(self) -> str:
        """What the program has logged so far (``""`` without a log)."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def last_log_line(self) -> str:
        """The last non-empty line the program logged (where it says why it stopped)."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        lines = [line.strip() for line in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()]
        return next((line for line in reversed(lines) if line), "")

    def _wait_until_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.ready_timeout_s
        assert self._process is not None
        last_status = "no answer"
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._forget()
                said = self.last_log_line() or f"exit status {code}"
                raise BackendUnavailable(f"{self.name} exited before it was ready (exit status {code}): {said}")
            try:
                status = httpx.get(self.base_url + self.ready_path, timeout=2.0).status_code
                if status == 200:
                    return
                last_status = f"HTTP {status}"
            except httpx.HTTPError:
                pass
            time.sleep(0.05)  # readiness polling of a child process, not test synchronisation
        self.stop(keep_log=True)
        raise BackendUnavailable(
            f"{self.name} on {self.base_url} was not ready within {self.ready_timeout_s:g} s "
            f"({self.ready_path}: {last_status}) — see {self.log_path}"
        )

    def stop(self, *, keep_log: bool = False) -> None:
        """End the process group: SIGTERM, then SIGKILL after a grace period; reaps it.

        The log of a server that ran cleanly is removed; ``keep_log`` keeps it for a failure to point at.
        """
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=STOP_TIMEOUT_S)
        self._forget()
        if self.log_path is not None and not (keep_log or self._keep_logs):
            self.log_path.unlink(missing_ok=True)

    def _forget(self) -> None:
        if self._process is not None:
            (pid_dir() / f"{self._process.pid}.json").unlink(missing_ok=True)
        self._process = None
        for scope in _SCOPES:
            scope.discard(self)


_SCOPES: list[set[ServerProcess]] = []  # one per open run (nested: a pytest run inside a test has its own)


def server_scope() -> Callable[[], int]:
    """Open a run's scope: every server started while it is the innermost is its own. The returned call closes it
    and stops those still running — one an interrupt caught between its start and its backend holding it, which
    nobody else would stop — and says how many. A run inside a test (pytester) never stops the outer run's."""
    scope: set[ServerProcess] = set()
    _SCOPES.append(scope)

    def close() -> int:
        if scope in _SCOPES:
            _SCOPES.remove(scope)
        left = [server for server in scope if server.running]
        for server in left:
            with contextlib.suppress(Exception):
                server.stop(keep_log=True)
        return len(left)

    return close


def program_output(command: Sequence[str]) -> str:
    """What a program prints (stdout and stderr), or ``""`` when it is absent or fails to run."""
    binary = shutil.which(command[0])
    if binary is None:
        return ""
    try:
        done = subprocess.run([binary, *command[1:]], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + "\n" + done.stderr
