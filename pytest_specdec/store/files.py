"""How the store touches the disk: the house JSON style, atomic writes, validated reads.

Every file the tool writes goes through :func:`write_atomically` (a temporary file in
the same folder, fsynced, then renamed into place), so a reader sees the old content
or the new, never a torn file. Reads give one line naming the file and the fix.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from pytest_specdec.axes import Conditions
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.records import (
    MEASUREMENT_PROTOCOL,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    RunRecord,
    migrate_comparison,
)

T = TypeVar("T")


def specdec_version() -> str:
    """The installed pytest-specdec version."""
    try:
        return metadata.version("pytest-specdec")
    except metadata.PackageNotFoundError:
        return "unknown"


def now_iso() -> str:
    """The current UTC time, to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


TEMPORARY_PREFIX = ".specdec-"  # what write_atomically's temporary files start with


def to_jsonable(value: object) -> Any:
    """A dataclass tree as JSON-ready dicts and lists (:class:`~pytest_specdec.axes.Conditions` as its object)."""
    if isinstance(value, Conditions):
        return value.dump()
    if not hasattr(value, "__dataclass_fields__"):
        return value
    return asdict(value, dict_factory=_fields)  # type: ignore[call-overload]


def _fields(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: item.dump() if isinstance(item, Conditions) else item for key, item in items}


def finite_json(value: Any) -> Any:
    """``value`` with every non-finite float as text (``"inf"``, ``"-inf"``, ``"nan"``): standard JSON only.

    An unbounded interval side is a real result (``inf``); JSON has no number for it, and a
    bare ``Infinity`` is not JSON. Readers turn the text back into the float (pydantic reads
    ``"inf"`` as a float; :func:`~pytest_specdec.store.nights.read_nights` does it for history).
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(item) for item in value]
    return value


def dumps(document: object) -> str:
    """The house JSON style: sorted keys, indent 2, trailing newline; never a non-finite number."""
    return (
        json.dumps(finite_json(to_jsonable(document)), sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
        + "\n"
    )


def write_atomically(path: Path, content: str | bytes) -> None:
    """Write through a temporary file in the same folder and rename it into place.

    A symbolic link (a baselines file a user keeps elsewhere) stays a link: its target is what is replaced.
    """
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise SpecdecUsageError(f"{path} is a folder — name a file to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    # Everything that can take a while (encoding a large file) comes before the temporary file exists, and that
    # file is made inside the try: a Ctrl-C or SIGTERM at any point leaves no temporary behind.
    data = content.encode("utf-8") if isinstance(content, str) else content
    temporary = ""
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f"{TEMPORARY_PREFIX}{path.name}.", suffix=".tmp")
        # mkstemp makes 0600 files: keep a replaced file's mode, else the mode a plain write would give.
        os.chmod(temporary, path.stat().st_mode & 0o7777 if path.exists() else _default_mode())
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        if temporary:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        raise


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def validate(kind: type[T], data: object, where: str) -> T:
    """Build ``kind`` from parsed JSON, or a one-line error naming the field."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(kind).validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise SpecdecUsageError(
            f"{where}: field {location!r}: {first['msg'].lower()} — restore the file from version control or regenerate it"
        ) from None


MAX_JSON_BYTES = 64 * 1024 * 1024  # far above any file pytest-specdec writes (a 100 000-pair run: about 20 MB)


def read_json(path: Path, limit: int = MAX_JSON_BYTES) -> object:
    """Parsed JSON, or a one-line error naming the file: bounded in size and depth, a regular file only (a
    stranger's submission can be a link to ``/dev/zero`` or nested a million deep)."""
    try:
        if path.exists() and not path.is_file() and not path.is_dir():
            raise SpecdecUsageError(f"{path} is not a regular file (a device, a pipe) — point at a JSON file")
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise SpecdecUsageError(
                f"{path} is larger than {limit // (1024 * 1024)} MiB: not a file pytest-specdec wrote — left unread"
            )
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise SpecdecUsageError(
            f"{path} is nested too deeply to be a file pytest-specdec wrote — left unread"
        ) from None
    except FileNotFoundError:
        raise SpecdecUsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SpecdecUsageError(f"{path} is a directory, not a JSON file — remove it or point elsewhere") from None
    except PermissionError:
        raise SpecdecUsageError(f"{path} cannot be read (permission denied) — fix its permissions") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SpecdecUsageError(
            f"{path} is not valid JSON ({error}) — restore it from version control or delete it"
        ) from None


def remove_stale_temporaries(folder: Path, older_than_s: float = 3600.0) -> list[Path]:
    """Delete what our interrupted atomic writes left behind (``.specdec-NAME.*.tmp``), an hour or more old.

    Only our own prefix: a user's hidden ``*.tmp`` under the same folder is never touched.
    """
    import time

    if not folder.is_dir():
        return []
    now = time.time()
    removed = []
    for leftover in folder.rglob(f"{TEMPORARY_PREFIX}*.tmp"):
        try:
            if now - leftover.stat().st_mtime >= older_than_s:
                leftover.unlink()
                removed.append(leftover)
        except OSError:
            continue
    return removed


def check_schema(data: object, path: Path) -> Mapping[str, object]:
    """The top-level object of a results or baseline file, migrated to the current schema.

    Unknown schema versions are refused; older readable ones are migrated in memory (the
    file on disk is rewritten only by an explicit accept).
    """
    if not isinstance(data, dict):
        raise SpecdecUsageError(f"{path}: expected a JSON object at the top level — restore it from version control")
    version = data.get("schema_version")
    if version is None:
        raise SpecdecUsageError(
            f"{path} is not a pytest-specdec results or baseline file (it has no schema_version) — give a file "
            "written by --specdec-json, or a baselines/<machine class>/<backend>.json"
        )
    if isinstance(version, bool) or version not in READABLE_SCHEMAS:
        raise SpecdecUsageError(
            f"{path}: schema_version {version!r} is not one this pytest-specdec ({specdec_version()}) reads "
            f"(it reads {', '.join(map(str, READABLE_SCHEMAS))}) — upgrade pytest-specdec or restore the file"
        )
    migrated = dict(data, schema_version=SCHEMA_VERSION)
    if isinstance(data.get("comparisons"), list):
        migrated["comparisons"] = [_migrated(c) for c in data["comparisons"]]
    if isinstance(data.get("entries"), dict):
        migrated["entries"] = {
            key: dict(entry, result=_migrated(entry["result"]))
            if isinstance(entry, dict) and "result" in entry
            else entry
            for key, entry in data["entries"].items()
        }
    return migrated


def _migrated(comparison: object) -> object:
    return migrate_comparison(comparison) if isinstance(comparison, dict) else comparison


def load_run(path: Path) -> RunRecord:
    """A results JSON file written by ``--specdec-json``: a comparison measured under a newer protocol than this
    pytest-specdec's, or with an estimate that is not a number, is one line, never rendered as a verdict."""
    run = validate(RunRecord, check_schema(read_json(path), path), str(path))
    for number, record in enumerate(run.comparisons, start=1):
        if record.protocol > MEASUREMENT_PROTOCOL:
            raise SpecdecUsageError(
                f"{path}: comparison {number} was measured under protocol {record.protocol}, newer than this "
                f"pytest-specdec's {MEASUREMENT_PROTOCOL} — upgrade pytest-specdec ({specdec_version()}) to read it"
            )
        shown = [("speedup", record.speedup), ("acceptance", record.acceptance)]
        bad = [name for name, interval in shown if interval is not None and any(
            math.isnan(x) for x in (interval.estimate, interval.low, interval.high))]  # fmt: skip
        if bad:
            raise SpecdecUsageError(
                f"{path}: comparison {number}'s {bad[0]} is not a number (nan) — not a file pytest-specdec wrote; "
                "restore it"
            )
    return run
