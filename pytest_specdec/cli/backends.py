"""``pytest-specdec backends``: every registered backend, its extra, releases and options, read from its spec."""

from __future__ import annotations

import argparse
import shutil
import textwrap

from tabulate import tabulate

from pytest_specdec.backends import (
    backend_spec,
    broken_backends,
    distribution_versions,
    missing_runtime,
    registered_backends,
)


def backends(args: argparse.Namespace) -> int:
    specs = registered_backends()
    chosen = [specs[name] for name in sorted(specs) if not args.name or name == args.name]
    if args.name and not chosen:
        backend_spec(args.name)  # one line: a backend that cannot be loaded, or the choices
    for name, line in sorted(broken_backends().items()):
        if not args.name or name == args.name:
            print(f"warning: {line}")
    width = shutil.get_terminal_size((100, 24)).columns  # COLUMNS, else the terminal's, else 100

    def say(text: str) -> None:
        print("\n".join(textwrap.wrap(text, width, subsequent_indent="    ")))

    for spec in chosen:
        missing = missing_runtime(spec)
        versions = ", ".join(f"{k} {v}" for k, v in distribution_versions(spec).items()) or "-"
        state = (
            f"not installed ({missing!r} missing: pip install 'pytest-specdec[{spec.extra}]')" if missing else versions
        )
        say(f"{spec.name}: {spec.summary or spec.target}")
        say(f"  installed: {state}")
        if spec.pairs:
            say("  profiles: " + ", ".join(sorted(spec.pairs)))
        extras = [label for label, present in (("stand-in", spec.standin), ("gate serve", spec.serve)) if present]
        if extras:
            say("  ships: " + ", ".join(extras))
        if spec.options:
            rows = [
                (f"{o.key}=", o.kind, o.help + (f" (also --specdec-{o.flag.replace('_', '-')})" if o.flag else ""))
                for o in spec.options
            ]
            headers = ("--specdec-backend-option", "type", "what")
            fixed = tabulate(rows, headers=headers, tablefmt="plain").splitlines()[0].index("what")  # its first column
            table = tabulate(
                rows, headers=headers, tablefmt="plain", maxcolwidths=[None, None, max(20, width - 2 - fixed)]
            )
            print("  " + table.replace("\n", "\n  "))
        print()
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``pytest-specdec backends [NAME]``."""
    parser = commands.add_parser("backends", help="list the registered backends and their options")
    parser.add_argument("name", nargs="?", help="one backend")
    parser.set_defaults(handler=backends)
