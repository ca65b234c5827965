"""``python -m pytest_specdec.backends.standin KIND [--port N] [--fault NAME]``: serve until stopped."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import cast

from pytest_specdec.backends.standin.http import FAULTS, StandinHandler, StandinServer
from pytest_specdec.errors import SpecdecUsageError


def kinds() -> list[str]:
    """The backends that ship a stand-in server (built-in folders and registered packages)."""
    from pytest_specdec.backends import registered_backends

    return sorted(name for name, spec in registered_backends().items() if spec.standin)


def handler_for(kind: str) -> type[StandinHandler]:
    """The handler class of one backend's stand-in, as its spec names it."""
    from pytest_specdec.backends import backend_spec
    from pytest_specdec.backends.base import load_attribute

    spec = backend_spec(kind)
    if spec.standin is None:
        raise SpecdecUsageError(f"backend {kind!r} ships no stand-in server — choose one of: {', '.join(kinds())}")
    return cast(type[StandinHandler], load_attribute(spec.standin))


def start(
    kind: str, port: int = 0, faults: Sequence[str] = (), settings: Mapping[str, str] | None = None
) -> StandinServer:
    """Load the synthetic pair and serve ``kind`` on 127.0.0.1 in a background thread."""
    from pytest_specdec.backends.standin.engine import GenerationEngine

    return StandinServer(handler_for(kind), GenerationEngine(), port, faults, settings).start()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve one stand-in until SIGTERM or Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m pytest_specdec.backends.standin")
    parser.add_argument("kind", choices=kinds())
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fault", action="append", choices=FAULTS, default=[])
    parser.add_argument("--spec-type", default="none", help="llama-server: speculation chosen at start")
    parser.add_argument("--spec-draft-n-max", default="3", help="llama-server: γ of the draft-* spec types")
    parser.add_argument("--spec-ngram-simple-size-m", default="48", help="llama-server: ngram-simple's draft length")
    parser.add_argument("--spec-ngram-mod-n-max", default="64", help="llama-server: ngram-mod's draft length")
    parser.add_argument("--no-speculation-context", action="store_true",
                        help="llama-server: the draft set-up failed and the server carries on without SD")  # fmt: skip
    parser.add_argument("--ollama-version", default=None, help="ollama: the release it answers as (/api/version)")
    args = parser.parse_args(argv)
    settings = {"spec_type": args.spec_type, "n_max": args.spec_draft_n_max,
                "ngram_simple_size_m": args.spec_ngram_simple_size_m, "ngram_mod_n_max": args.spec_ngram_mod_n_max,
                "speculation_context": "failed" if args.no_speculation_context else "ok",
                **({"version": args.ollama_version} if args.ollama_version else {})}  # fmt: skip
    server = start(args.kind, args.port, args.fault, settings)
    if args.no_speculation_context:  # upstream's SRV_ERR line (server-context.cpp), then it serves without SD
        print("srv load_model: failed to initialize speculative decoding context: stand-in draft set-up", flush=True)
    print(f"{args.kind} stand-in listening on {server.url}", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with contextlib.suppress(KeyboardInterrupt):
        stopped.wait()
    server.stop()
    server.engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
