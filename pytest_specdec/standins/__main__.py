"""``python -m pytest_specdec.standins KIND [--port N] [--fault NAME]``: serve until stopped."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Mapping, Sequence

from pytest_specdec.standins.http import FAULTS, StandinHandler, StandinServer

KINDS = ("ollama", "mtplx", "llama-server")


def handler_for(kind: str) -> type[StandinHandler]:
    """The handler class of one stand-in."""
    if kind == "ollama":
        from pytest_specdec.standins.ollama import OllamaHandler

        return OllamaHandler
    if kind == "mtplx":
        from pytest_specdec.standins.mtplx import MtplxHandler

        return MtplxHandler
    from pytest_specdec.standins.llama_server import LlamaServerHandler

    return LlamaServerHandler


def start(
    kind: str, port: int = 0, faults: Sequence[str] = (), settings: Mapping[str, str] | None = None
) -> StandinServer:
    """Load the synthetic pair and serve ``kind`` on 127.0.0.1 in a background thread."""
    from pytest_specdec.standins.engine import GenerationEngine

    return StandinServer(handler_for(kind), GenerationEngine(), port, faults, settings).start()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve one stand-in until SIGTERM or Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m pytest_specdec.standins")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fault", action="append", choices=FAULTS, default=[])
    parser.add_argument("--spec-type", default="none", help="llama-server: speculation chosen at start")
    parser.add_argument("--spec-draft-n-max", default="3", help="llama-server: γ of a speculating server")
    args = parser.parse_args(argv)
    settings = {"spec_type": args.spec_type, "n_max": args.spec_draft_n_max}
    server = start(args.kind, args.port, args.fault, settings)
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
