"""``pytest-specdec baselines list|show|diff|accept``: accepted baselines and candidates."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from tabulate import tabulate

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.render.verdict_table import interval_cell
from pytest_specdec.store.baselines import (
    BaselineEntry,
    BaselineFile,
    BaselineStore,
    list_baseline_files,
    load_any,
    read_baseline_file,
)
from pytest_specdec.store.files import dumps, now_iso
from pytest_specdec.store.records import Conclusion


def listing(args: argparse.Namespace) -> int:
    rows = []
    for path in list_baseline_files(args.dir):
        stored = load_any(path)
        if args.machine and stored.machine_class != args.machine:
            continue
        for key, entry in sorted(stored.entries.items()):
            r = entry.result
            rows.append(
                [
                    stored.machine_class,
                    stored.backend,
                    key,
                    interval_cell(r.speedup),
                    r.release,
                    r.judgement.shown,
                    entry.provenance,
                ]
            )
    if not rows:
        if not args.dir.is_dir():
            raise SpecdecUsageError(f"{args.dir}: no such baselines folder — pass --dir, or accept a run first")
        known = sorted({load_any(p).machine_class for p in list_baseline_files(args.dir)})
        if args.machine:
            raise SpecdecUsageError(
                f"no baselines for machine class {args.machine!r} under {args.dir} — known: {', '.join(known) or 'none'}"
            )
        print(f"no baselines under {args.dir}")
        return 0
    headers = ("machine class", "backend", "key", "speedup", "release", "verdict", "provenance")
    print(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
    return 0


def show(args: argparse.Namespace) -> int:
    matches = []
    for path in list_baseline_files(args.dir):
        stored = load_any(path)
        matches += [(path, key, entry) for key, entry in stored.entries.items() if args.key in key]
    if not matches:
        raise SpecdecUsageError(
            f"no baseline under {args.dir} has a key containing {args.key!r} — see 'pytest-specdec baselines list'"
        )
    for path, key, entry in matches:
        print(f"# {path}: {key}")
        print(dumps(entry), end="")
    return 0


def _candidate_files(root: Path) -> list[BaselineFile]:
    """Every candidates file under ``root``, each checked to be in its own folder."""
    found = []
    for path in list_baseline_files(root / "candidates"):
        pending = load_any(path)
        if (path.parent.name, path.stem) != (pending.machine_class, pending.backend):
            raise SpecdecUsageError(
                f"{path} says it holds {pending.machine_class}/{pending.backend} — a candidates file lives at "
                "candidates/<machine class>/<backend>.json; move it back or delete it"
            )
        found.append(pending)
    return found


def accept(args: argparse.Namespace) -> int:
    """The candidates you reviewed (``pytest-specdec baselines diff``) accepted as they are, without measuring again: those
    whose key contains one of ``KEY`` (every one without), inconclusive ones only with ``--accept-inconclusive``."""
    pending = _candidate_files(args.dir)
    chosen = [(f, key, e) for f in pending for key, e in sorted(f.entries.items())
              if not args.key or any(part in key for part in args.key)]  # fmt: skip
    if not chosen:
        what = f"whose key contains {' or '.join(map(repr, args.key))} " if args.key else ""
        raise SpecdecUsageError(
            f"no candidate {what}under {args.dir / 'candidates'} — see 'pytest-specdec baselines diff'"
        )
    taken: dict[tuple[str, str], dict[str, BaselineEntry]] = {}
    for stored, key, entry in chosen:
        if entry.result.judgement.conclusion is Conclusion.INCONCLUSIVE and not args.accept_inconclusive:
            s = entry.result.speedup
            print(f"not accepted: {key} — inconclusive ({s.estimate:.2f}x [{s.low:.2f}, {s.high:.2f}]) can never "
                  "flip; measure more pairs, or pass --accept-inconclusive")  # fmt: skip
            continue
        taken.setdefault((stored.machine_class, stored.backend), {})[key] = replace(entry, accepted_at=now_iso())
    for (machine_class, backend), entries in sorted(taken.items()):
        store = BaselineStore(args.dir, machine_class)
        path = store.write(backend, entries)
        store.discard_candidates(backend, list(entries))
        print(f"accepted {len(entries)} candidate(s) for {machine_class}/{backend}: "
              f"{'wrote ' + str(path) if path else 'the accepted file already held them'}")  # fmt: skip
    return 0 if taken else 1


def diff(args: argparse.Namespace) -> int:
    """Candidates against the accepted baselines: what accepting them would change."""
    rows = []
    candidates_root = args.dir / "candidates"
    for pending in _candidate_files(args.dir):
        accepted = read_baseline_file(
            args.dir / pending.machine_class / f"{pending.backend}.json", pending.machine_class, pending.backend
        )
        rows += _diff_rows(pending, accepted)
    if not rows:
        print(f"no candidates under {candidates_root}")
        return 0
    headers = ("machine class", "backend", "key", "accepted", "candidate", "verdicts")
    print(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
    return 0


def _diff_rows(pending: BaselineFile, accepted: BaselineFile) -> list[list[str]]:
    rows = []
    for key, entry in sorted(pending.entries.items()):
        old = accepted.entries.get(key)
        new = entry.result
        before = f"{interval_cell(old.result.speedup)} ({old.result.release})" if old else "(none)"
        after = f"{interval_cell(new.speedup)} ({new.release})"
        verdicts = f"{old.result.judgement.shown} → {new.judgement.shown}" if old else new.judgement.shown
        rows.append([pending.machine_class, pending.backend, key, before, after, verdicts])
    return rows


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``pytest-specdec baselines``."""
    baselines = commands.add_parser("baselines", help="inspect accepted baselines and candidates")
    actions = baselines.add_subparsers(dest="action", required=True)
    for name, handler, help_text in (
        ("list", listing, "one line per accepted baseline"),
        ("show", show, "every field of the baselines whose key contains KEY"),
        ("diff", diff, "candidates against the accepted baselines"),
        ("accept", accept, "accept the reviewed candidates as they are, without measuring again"),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("--dir", type=Path, default=Path("baselines"), help="baselines directory")
        if name == "show":
            action.add_argument("key", help="part of a baseline key (e.g. a node id)")
        if name == "list":
            action.add_argument("--machine", help="only this machine class")
        if name == "accept":
            action.add_argument("key", nargs="*", help="accept only candidates whose key contains one (default: all)")
            action.add_argument("--accept-inconclusive", action="store_true",
                                help="accept inconclusive candidates too (such a baseline can never flip)")  # fmt: skip
        action.set_defaults(handler=handler)
