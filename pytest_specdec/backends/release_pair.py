"""Two releases of one backend behind one Backend: an arm's ``release`` option picks which answers.

For a same-night old-versus-new comparison. In-process backends (mlx, llama-cpp-python)
cannot hold two releases in one interpreter, so each release runs in a worker process
on its own virtual environment (:mod:`pytest_specdec.backends.worker`), and this driver
alternates requests between them, timing every burst with one clock.
:class:`InProcessReleases` does the same with two backend objects (the simulated backend
in studies of the decision rule).
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any, ClassVar

from pytest_specdec.backends.base import (
    Arm,
    Backend,
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    TokenBurst,
)
from pytest_specdec.backends.context import KnowsContext
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError, SpecdecUsageError

RELEASES = ("old", "new")


def release_of(arm: Arm) -> str:
    """``old`` or ``new``: the release an arm runs on."""
    chosen = str(arm.options.get("release", ""))
    if chosen not in RELEASES:
        raise BackendRuntimeError(f"arm {arm.label!r} names no release (old or new)")
    return chosen


def without_release(arm: Arm) -> Arm:
    """The arm as its release's backend sees it."""
    return replace(arm, options={k: v for k, v in arm.options.items() if k != "release"})


LOAD_TIMEOUT_S = 900.0  # a worker loading its release's models (a large GGUF, a first compile)
ANSWER_TIMEOUT_S = 300.0  # any later message: a burst, the stats, an answer (a long prefill included)


class WorkerProcess:
    """One release's backend in a process of its own (``python -m pytest_specdec.backends.worker``)."""

    def __init__(self, python: str, backend: str, pair: ModelPair, options: Mapping[str, str]) -> None:
        spec = {"backend": backend, "target": pair.target, "draft": pair.draft, "options": dict(options)}
        self._process = subprocess.Popen(
            [python, "-m", "pytest_specdec.backends.worker", json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        )  # fmt: skip
        # Lines are read on a thread of their own so that every wait has a deadline (a worker that hangs
        # mid-request would otherwise hold the confirm step for ever).
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, name="specdec-worker-reader", daemon=True).start()
        try:
            ready = self._read(LOAD_TIMEOUT_S)
            if "error" in ready:
                raise ModelLoadError(f"{python} could not load {backend}: {ready['error']}")
            if "ready" not in ready:
                raise BackendRuntimeError(f"the worker said something that is not its protocol: {str(ready)[:200]}")
            self.release = str(ready["ready"])
            self.versions = {str(k): str(v) for k, v in dict(ready.get("versions") or {}).items()}
        except BaseException:  # a worker that cannot start is never left running with its models
            self._process.kill()
            self.close()
            raise

    def _pump(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put("")  # the worker's stdout closed

    def _read(self, timeout: float | None = None) -> dict[str, Any]:
        waited = ANSWER_TIMEOUT_S if timeout is None else timeout
        try:
            line = self._lines.get(timeout=waited)
        except queue.Empty:
            self._process.kill()
            raise BackendRuntimeError(
                f"the worker process answered nothing for {waited:g} s — it was stopped"
            ) from None
        if not line:
            raise BackendRuntimeError(f"the worker process ended (exit {self._process.poll()})")
        try:
            found: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            raise BackendRuntimeError(f"the worker said something that is not its protocol: {line[:200]!r}") from None
        return found

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Send one request; yield its bursts as they arrive."""
        assert self._process.stdin is not None
        asked = {"prompt": request.prompt, "arm": asdict(request.arm), "max_tokens": request.max_tokens,
                 "seed": request.seed, "sampling": asdict(request.sampling),
                 "every_token": request.every_token}  # fmt: skip
        self._process.stdin.write(json.dumps(asked) + "\n")
        self._process.stdin.flush()
        # After the first token a measured generation sends the rest at once: it gets the time a burst a token had.
        rest = None if request.every_token else ANSWER_TIMEOUT_S * max(1, request.max_tokens - 1)
        waited: float | None = None
        while True:
            message = self._read(waited)
            if "error" in message:
                raise BackendRuntimeError(str(message["error"]))
            if "stats" in message:
                return GenerationStats(**message["stats"])
            flags = message.get("draft")
            yield TokenBurst(tuple(message["burst"]), tuple(flags) if isinstance(flags, list) else None)
            waited = rest

    def call(self, name: str, *args: object) -> Any:
        """A long-context question (``count_tokens`` …) answered by the worker's backend."""
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"call": name, "args": list(args)}) + "\n")
        self._process.stdin.flush()
        message = self._read()
        if "error" in message:
            raise BackendRuntimeError(str(message["error"]))
        return message.get("value")

    def close(self) -> None:
        """End the worker."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()


class _Releases:
    """Routing and identity shared by both kinds of pair."""

    name: ClassVar[str] = "release-pair"
    _pair: ModelPair
    _backend: str

    def _answerer(self, release: str) -> Backend | WorkerProcess:
        raise NotImplementedError

    def _release(self, release: str) -> str:
        raise NotImplementedError

    @property
    def pair(self) -> ModelPair:
        """The models both releases serve."""
        return self._pair

    def releases(self) -> tuple[str, str]:
        """What the old and the new release say they are, each read from its own worker."""
        return self._release("old"), self._release("new")

    def _versions(self, release: str) -> Mapping[str, str]:
        raise NotImplementedError

    def same_release(self) -> str | None:
        """Tonight's release when the "old" worker runs it too — the same release and the same package versions,
        neither unknown — else ``None`` (then the A/B can tell them apart)."""
        (before, tonight), versions = self.releases(), (self._versions("old"), self._versions("new"))
        if before != tonight or versions[0] != versions[1] or "unknown" in tonight:
            return None
        return tonight

    def fingerprint(self) -> Fingerprint:
        """Both releases, old → new."""
        return Fingerprint(self._backend, f"{self._release('old')} → {self._release('new')}")

    def model_digest(self) -> str:
        """Not a stored result: the pair has no digest of its own."""
        return "release-pair"

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """The request on the release its arm names."""
        answerer = self._answerer(release_of(request.arm))
        return answerer.generate(replace(request, arm=without_release(request.arm)))

    def streams_refusal(self, streams: int) -> str | None:
        """Several streams at once are not re-measured: each release's worker takes one request at a time."""
        return (
            f"the old-versus-new workers take one request at a time, so {streams} streams at once are not "
            "re-measured release against release"
        )

    def _ask(self, release: str, name: str, *args: object) -> Any:
        answerer = self._answerer(release)
        if isinstance(answerer, WorkerProcess):
            return answerer.call(name, *args)
        if not isinstance(answerer, KnowsContext):
            raise SpecdecUsageError(f"backend {self._backend!r} lacks {name} (the KnowsContext protocol)")
        return getattr(answerer, name)(*args)

    # A context comparison re-measured on both releases: tonight's tokenizer builds the prefix (the
    # prompts both run), and both releases are held in memory at once, so their needs add up.
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by tonight's release's tokenizer."""
        return int(self._ask("new", "count_tokens", text))

    def template_tokens(self) -> int:
        """What tonight's release wraps a prompt in."""
        return int(self._ask("new", "template_tokens"))

    def context_window(self) -> int:
        """The smaller window of the two releases (both must hold the context)."""
        return min(int(self._ask(release, "context_window")) for release in RELEASES)

    def context_bytes(self, tokens: int) -> int:
        """Both releases' caches, buffers and drafts at ``tokens`` positions, added up (each beyond its target's weights)."""
        return sum(int(self._ask(release, "context_bytes", tokens)) for release in RELEASES)

    def prepare_context(self, tokens: int) -> None:
        """Both releases make room for ``tokens`` positions."""
        for release in RELEASES:
            self._ask(release, "prepare_context", tokens)


class ReleasePair(_Releases):
    """Two releases in two worker processes, one per virtual environment."""

    def __init__(
        self,
        old_python: str,
        new_python: str,
        backend: str,
        pair: ModelPair,
        options: Mapping[str, str],
        *,
        old_options: Mapping[str, str] | None = None,
    ) -> None:
        """``old_options`` (default: ``options``) point the old worker at the old release (a server's ``binary=``)."""
        self._pair, self._backend = pair, backend
        self._workers = {
            "old": WorkerProcess(old_python, backend, pair, options if old_options is None else old_options)
        }
        try:
            self._workers["new"] = WorkerProcess(new_python, backend, pair, options)
        except BaseException:
            self._workers["old"].close()
            raise

    def _answerer(self, release: str) -> WorkerProcess:
        return self._workers[release]

    def _release(self, release: str) -> str:
        return self._workers[release].release

    def _versions(self, release: str) -> Mapping[str, str]:
        return self._workers[release].versions

    def close(self) -> None:
        """End both workers."""
        for worker in self._workers.values():
            worker.close()


class InProcessReleases(_Releases):
    """Two backend objects in this process (the simulated backend's releases, in studies)."""

    def __init__(self, old: Backend, new: Backend) -> None:
        self._pair, self._backend = new.pair, new.fingerprint().backend
        self._backends = {"old": old, "new": new}

    def _answerer(self, release: str) -> Backend:
        return self._backends[release]

    def _release(self, release: str) -> str:
        return self._backends[release].fingerprint().release

    def _versions(self, release: str) -> Mapping[str, str]:
        return self._backends[release].fingerprint().versions

    def close(self) -> None:
        """Close both backends."""
        for backend in self._backends.values():
            backend.close()
