"""One backend in a process of its own, spoken to over its standard input and output.

``python -m pytest_specdec.backends.worker SPEC_JSON`` loads the backend that
``SPEC_JSON`` names (``{"backend", "target", "draft", "options"}``) through the registry
of the interpreter it runs in — so two workers on two virtual environments hold two
releases of the same backend side by side — and answers one JSON line per request:

* in: ``{"prompt", "arm": {"label", "speculative", "num_draft", "options"}, "max_tokens", "seed",
  "sampling": {"temperature", "top_p"}}``
* out: ``{"burst": [ids], "draft": [flags] | null}`` per burst as it is decoded, then
  ``{"stats": {…GenerationStats…}}``; a failure is ``{"error": "…"}``.
* in: ``{"call": NAME, "args": […]}`` for a method of the long-context protocol
  (:class:`~pytest_specdec.backends.context.KnowsContext`: ``count_tokens`` …); out: ``{"value": …}``.

The first line it writes says it is ready: ``{"ready": release, "versions": {…}}``. The
driver (:class:`~pytest_specdec.backends.release_pair.ReleasePair`) times the bursts as
they arrive, so both releases are timed by one clock.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import TextIO

from pytest_specdec.backends import load_backend
from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair
from pytest_specdec.backends.context import CONTEXT_METHODS, KnowsContext
from pytest_specdec.backends.sampling import Sampling


def _write(out: TextIO, message: dict[str, object]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def serve(spec: dict[str, object], requests: TextIO, out: TextIO) -> int:
    """Load the backend, then answer requests until the input ends."""
    options = {str(k): str(v) for k, v in dict(spec.get("options") or {}).items()}  # type: ignore[call-overload]
    pair = ModelPair(str(spec["target"]), str(spec["draft"]) if spec.get("draft") else None)
    try:
        backend = load_backend(str(spec["backend"]), pair, options)
    except Exception as error:  # the driver shows it as one line
        _write(out, {"error": f"{type(error).__name__}: {error}"})
        return 1
    found = backend.fingerprint()
    _write(out, {"ready": found.release, "versions": dict(found.versions), "device": found.device})
    try:
        for line in requests:
            asked = json.loads(line)
            if "call" in asked:
                _write(out, _answer(backend, str(asked["call"]), list(asked.get("args") or [])))
                continue
            arm = Arm(**asked["arm"])
            sampling = Sampling(**asked["sampling"]) if asked.get("sampling") else Sampling()
            request = GenerationRequest(str(asked["prompt"]), arm, int(asked["max_tokens"]), int(asked["seed"]),
                                        sampling, bool(asked.get("every_token", True)))  # fmt: skip
            try:
                stream = backend.generate(request)
                while True:
                    try:
                        burst = next(stream)
                    except StopIteration as stop:
                        _write(out, {"stats": asdict(stop.value)})
                        break
                    _write(out, {"burst": list(burst.token_ids), "draft": burst.from_draft})
            except Exception as error:
                _write(out, {"error": f"{type(error).__name__}: {error}"})
    finally:
        backend.close()
    return 0


def _answer(backend: object, name: str, args: list[object]) -> dict[str, object]:
    """A long-context question answered by the loaded backend (only those methods are callable)."""
    if name not in CONTEXT_METHODS:
        return {"error": f"the worker answers {', '.join(CONTEXT_METHODS)}, not {name!r}"}
    if not isinstance(backend, KnowsContext):
        return {"error": f"this backend lacks {name} (the KnowsContext protocol)"}
    try:
        return {"value": getattr(backend, name)(*args)}
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_specdec.backends.worker SPEC_JSON``.

    The protocol keeps the process's standard output to itself: whatever a library prints
    there (from Python or from native code) goes to standard error instead.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    sys.stdout.flush()
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return serve(json.loads(arguments[0]), sys.stdin, protocol)


if __name__ == "__main__":
    sys.exit(main())
