"""The ``specdec`` command: baselines, reports, history, evidence and the CI gate outside a pytest run.

One module per command family (``baselines``, ``report``, ``research``, ``gate``), each
registering its own sub-commands. It never imports the pytest plugin module. Bad input
prints one line on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from pytest_specdec.config import requested_backend
from pytest_specdec.errors import SpecdecUsageError

Command = Callable[[argparse.Namespace], int]


def run_pytest(argv: Sequence[str]) -> int:
    """``pytest-specdec pytest ARGS``: pytest in this process, the backend's native libraries loaded first.

    On CUDA images where numpy's native libraries, once loaded, make llama.cpp's first
    ``Llama(...)`` crash, any pytest plugin that imports numpy at start-up (jaxtyping,
    hypothesis extensions, …) is enough to trigger it; loading ``llama_cpp`` before
    pytest and its plugins avoids it.
    """
    import importlib
    import importlib.util

    from pytest_specdec.backends import registered_backends

    spec = registered_backends().get(requested_backend(argv) or "")
    module = spec.native_first if spec is not None else None
    if module is not None and importlib.util.find_spec(module) is not None:
        importlib.import_module(module)
    import pytest

    return int(pytest.main(list(argv)))


def _standin(args: argparse.Namespace) -> int:
    from pytest_specdec.backends.standin.__main__ import main as serve

    return serve([args.kind, "--port", str(args.port), *(f"--fault={f}" for f in args.fault)])


def build_parser() -> argparse.ArgumentParser:
    """The ``specdec`` argument parser: each command module registers its own sub-commands."""
    from pytest_specdec.backends.standin.__main__ import kinds
    from pytest_specdec.cli import backends, baselines, community, doctor, gate, report, research, site

    parser = argparse.ArgumentParser(prog="pytest-specdec", description="pytest-specdec baselines, reports and history")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (backends, doctor, baselines, report, research, gate, site, community):
        module.register(commands)
    commands.add_parser(
        "pytest", help="run pytest with the backend's native libraries loaded first (CUDA images: see README)"
    )
    standin = commands.add_parser("standin", help="serve a backend's stand-in server on loopback")
    standin.add_argument("kind", choices=kinds())
    standin.add_argument("--port", type=int, default=0)
    standin.add_argument(
        "--fault", action="append", default=[], help="inject a fault (see pytest_specdec.backends.standin.http)"
    )
    standin.set_defaults(handler=_standin)
    return parser


def _say_error(text: str) -> None:
    """One line on stderr: a control character in a path or a value (a newline, a carriage return) is shown
    escaped, never let loose to break the line."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    print(f"pytest-specdec: error: {shown}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``specdec`` console script."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["pytest"]:
        return run_pytest(arguments[1:])
    args = build_parser().parse_args(arguments)
    handler: Command = args.handler
    from pytest_specdec.backends.server_process import interrupt_on_sigterm

    restore = interrupt_on_sigterm()  # the gate's steps start servers: SIGTERM stops them as Ctrl-C does
    try:
        status = handler(args)
        from pytest_specdec.cli import report, research

        for line in dict.fromkeys(report.TORN + research.TORN):
            print(f"specdec: warning: {line}", file=sys.stderr)
        sys.stdout.flush()  # a closed pipe is met here, inside the handlers below, not at exit
        return status
    except SpecdecUsageError as error:
        _say_error(str(error))
        return 2
    except ImportError as error:
        _say_error(f"{error.name} is not installed — pip install 'pytest-specdec[plot]'")
        return 2
    except BrokenPipeError:  # `specdec … | head`: the reader has gone; nothing to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except IsADirectoryError as error:
        _say_error(f"{error.filename} is a folder — name a file")
        return 2
    except OSError as error:
        _say_error(f"{error.filename or ''}: {error.strerror or error}")
        return 2
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into one: the servers it started were stopped
        _say_error("interrupted")
        return 130
    finally:
        restore()
