"""A baseline file in two parts: what a reviewer reads, and the rest beside it.

``<backend>.json`` keeps, per accepted key, what a review of the change needs — when and how it was
accepted, the release, the conditions, the speedup and acceptance intervals, the verdict and its
bounds, the trials and the protocol — sorted and small (under 40 lines an entry), plus the SHA-256 of
the rest. ``<backend>.samples.jsonl`` beside it holds the rest, one line per key, sorted: the per-pair
samples, notes, theory, versions, machine and commit info. Readers join the two (the drift test and
re-analysis read the samples); a details line whose digest is not the one the main file records was
edited or belongs to another version, and is refused in one line. Files written before the split
(every entry whole in the one file) are read as they are; an accept rewrites them split.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import finite_json, read_json, write_atomically

DETAILS_SUFFIX = ".samples.jsonl"
# What a reviewer reads of an entry, and of its result; everything else goes to the details line.
# (The test, models and digest are in the key, the backend in the file's name.)
REVIEWED = ("accepted_at", "provenance")
REVIEWED_RESULT = (
    "release", "category", "profile", "conditions", "speedup", "acceptance", "trials", "judgement", "protocol",
)  # fmt: skip


def details_path(path: Path) -> Path:
    """``llama-cpp.samples.jsonl`` beside ``llama-cpp.json``."""
    return path.with_name(path.stem + DETAILS_SUFFIX)


def _line(value: object) -> str:
    return json.dumps(finite_json(value), sort_keys=True, ensure_ascii=False, allow_nan=False)


def split(document: Mapping[str, Any], details_name: str) -> tuple[dict[str, Any], list[str]]:
    """The reviewed document and the details lines of a whole baseline document (``to_jsonable`` of a file).

    >>> main, lines = split({"schema_version": 3, "entries": {"k": {"accepted_at": "t", "machine_info": {"cpu": "x"},
    ...     "result": {"release": "r 1", "samples": [1, 2]}}}}, "b.samples.jsonl")
    >>> main["entries"]["k"]["result"], main["details"], lines[0].startswith('{"key": "k"')
    ({'release': 'r 1'}, 'b.samples.jsonl', True)
    """
    entries, lines = {}, []
    for key, entry in sorted(document["entries"].items()):
        result = entry["result"]
        rest = {name: value for name, value in entry.items() if name not in (*REVIEWED, "result")}
        rest["result"] = {name: value for name, value in result.items() if name not in REVIEWED_RESULT}
        line = _line({"key": key, **rest})
        entries[key] = {
            **{name: entry[name] for name in REVIEWED if name in entry},
            "result": {name: result[name] for name in REVIEWED_RESULT if name in result},
            "details_sha256": hashlib.sha256(line.encode("utf-8")).hexdigest(),
        }
        lines.append(line)
    return {**document, "entries": entries, "details": details_name}, lines


def reviewable_json(value: object, level: int = 0) -> str:
    """JSON, indented, with each object or list of plain values on one line: an interval is one line to review.

    >>> print(reviewable_json({"k": {"speedup": {"low": 0.9, "high": 1.1}, "trials": 16}}))
    {
      "k": {
        "speedup": {"high": 1.1, "low": 0.9},
        "trials": 16
      }
    }
    """
    pad = "  " * level

    def nested(items: Any) -> bool:
        return any(isinstance(item, dict | list) and item for item in items)

    if isinstance(value, dict) and nested(value.values()):
        inner = [
            f"{pad}  {json.dumps(k, ensure_ascii=False)}: {reviewable_json(v, level + 1)}"
            for k, v in sorted(value.items())
        ]
        return "{\n" + ",\n".join(inner) + f"\n{pad}}}"
    if isinstance(value, list) and nested(value):
        return "[\n" + ",\n".join(f"{pad}  {reviewable_json(v, level + 1)}" for v in value) + f"\n{pad}]"
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)


def rendered(path: Path, document: Mapping[str, Any]) -> tuple[str, str]:
    """The texts of the reviewed file at ``path`` and of its details file, for a whole baseline document."""
    main, lines = split(document, details_path(path).name)
    return reviewable_json(finite_json(main)) + "\n", "".join(line + "\n" for line in lines)


def unchanged(path: Path, texts: tuple[str, str]) -> bool:
    """Whether both files already hold ``texts``."""
    side = details_path(path)
    return path.is_file() and side.is_file() and (path.read_text("utf-8"), side.read_text("utf-8")) == texts


def write_split(path: Path, texts: tuple[str, str]) -> None:
    """Write the details, then the reviewed file (a reader never finds a reviewed entry whose details are not
    there yet)."""
    write_atomically(details_path(path), texts[1])
    write_atomically(path, texts[0])


def remove_split(path: Path) -> None:
    """Remove a baseline file and its details."""
    path.unlink(missing_ok=True)
    details_path(path).unlink(missing_ok=True)


def joined(data: object, path: Path) -> object:
    """A baseline document as read from ``path``, with its details joined back into each entry (a document
    written whole, before the split, as it is)."""
    if not isinstance(data, dict) or "details" not in data or not isinstance(data.get("entries"), dict):
        return data
    side = path.with_name(str(data["details"]))
    if side.name != details_path(path).name:
        raise SpecdecUsageError(f"{path}: details {data['details']!r} is not {details_path(path).name!r} — restore "
                                "the file from version control")  # fmt: skip
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    if side.is_file():
        for number, line in enumerate(side.read_text(encoding="utf-8").splitlines(), 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise SpecdecUsageError(f"{side}:{number} is not JSON — restore it from version control") from None
            if isinstance(row, dict) and isinstance(row.get("key"), str):
                found[row["key"]] = (line, row)
    entries = {}
    for key, entry in data["entries"].items():
        if key not in found:
            raise SpecdecUsageError(f"{side} has no details for {key} — restore it from version control, or accept "
                                    "that result again")  # fmt: skip
        line, row = found[key]
        if not isinstance(entry, dict) or hashlib.sha256(line.encode("utf-8")).hexdigest() != entry.get(
            "details_sha256"
        ):
            raise SpecdecUsageError(f"{side}: the details of {key} are not the ones {path.name} accepted (edited, or "
                                    "from another version) — restore both files from version control")  # fmt: skip
        rest = {name: value for name, value in row.items() if name not in ("key", "result")}
        result = {**row.get("result", {}), **entry.get("result", {})}
        entries[key] = {**rest, **{k: v for k, v in entry.items() if k != "details_sha256"}, "result": result}
    return {k: v for k, v in data.items() if k != "details"} | {"entries": entries}


def read_joined(path: Path) -> object:
    """:func:`~pytest_specdec.store.files.read_json` of a baseline file, its details joined."""
    return joined(read_json(path), path)


def copy_split(source: Path, destination: Path) -> None:
    """A baseline file and its details under another name (the details file named after it, as readers expect)."""
    document = read_joined(source)
    if isinstance(document, dict) and isinstance(document.get("entries"), dict):
        write_split(destination, rendered(destination, document))
