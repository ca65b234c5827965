"""Backend releases whose behaviour differs, as wheels built by hand (no build tools needed).

``specdec-testbackend`` registers ``testbackend`` through the ``pytest_specdec.backends``
entry point; it is the simulated backend with its true speedup fixed by the release.
``build_wrapped_mlx_lm`` repacks the installed mlx-lm as its next patch release whose
``stream_generate`` misbehaves, as a broken upstream release would.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

BACKEND_SOURCE = '''"""A backend whose releases differ: SD loses in 1.0 and wins in 1.1 (a test package)."""
import os
from dataclasses import replace
from pathlib import Path
from pytest_specdec.backends.base import BackendSpec
from pytest_specdec.backends.simulated.adapter import SimulatedBackend

VERSION = "{version}"
FIRST_RUN_SPEEDUP = "{first_run_speedup}"
BY_MACHINE = {by_machine!r}  # machine class -> this release's speedup there (a chip-dependent release)


def speedup():
    """This release's speedup: on a machine class it names, that class's; a release with a first-run speedup has
    it in the first process that measures it after its install, and its own speedup in every later one (a flip
    that does not repeat)."""
    here = BY_MACHINE.get(os.environ.get("SPECDEC_MACHINE_CLASS", ""))
    if here is not None:
        return str(here)
    if not FIRST_RUN_SPEEDUP:
        return "{speedup}"
    mark = Path(__file__).with_name("first-run")
    try:
        with mark.open("x") as first:
            first.write(str(os.getpid()))
    except FileExistsError:
        pass
    return FIRST_RUN_SPEEDUP if mark.read_text() == str(os.getpid()) else "{speedup}"


class ReleasedBackend(SimulatedBackend):
    name = "testbackend"

    def __init__(self, pair, options):
        super().__init__(pair, {{"speedup": speedup(), "counter_scale": "{counter_scale}", "release": VERSION,
                                 **options}})

    def fingerprint(self):
        found = super().fingerprint()
        return replace(found, backend=self.name, release="specdec-testbackend " + VERSION,
                       versions={{"specdec-testbackend": VERSION}})


SPEC = BackendSpec(name="testbackend", target="specdec_testbackend:ReleasedBackend",
                   distributions=("specdec-testbackend",), in_process=True)
'''


def build_wheel(
    folder: Path,
    version: str,
    speedup: float,
    *,
    counter_scale: float = 1.0,
    first_run_speedup: float | None = None,
    by_machine: Mapping[str, float] | None = None,
    requires: Sequence[str] = (),
) -> Path:
    """A pure-Python wheel of specdec-testbackend, written by hand (no build tools needed).

    ``requires``: the distributions it depends on (a library under the engine, :func:`build_library`).

    ``by_machine``: the release's speedup on the machine classes it names (``SPECDEC_MACHINE_CLASS``), as a
    release that pays off on one chip and not on another.
    ``counter_scale`` below 1 makes the release report shorter decode times for SD than it
    spent: a change of what its counters cover, not of its speed. ``first_run_speedup``: the
    speedup of the first process that measures this install (later ones get ``speedup``).
    """
    info = f"specdec_testbackend-{version}.dist-info"
    files: dict[str, bytes | str] = {
        "specdec_testbackend/__init__.py": BACKEND_SOURCE.format(
            version=version,
            speedup=speedup,
            counter_scale=counter_scale,
            first_run_speedup="" if first_run_speedup is None else first_run_speedup,
            by_machine=dict(by_machine or {}),
        ),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: specdec-testbackend\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {name}\n" for name in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test_gate_act\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[pytest_specdec.backends]\ntestbackend = specdec_testbackend:SPEC\n",
    }
    return _write_wheel(folder / f"specdec_testbackend-{version}-py3-none-any.whl", info, files)


# What the wrapped release's mlx_lm/__init__.py adds: the SD path silently decodes plainly (mlx_lm/generate.py's
# stream_generate takes draft_model= and num_draft_tokens=; this release drops both).
DROPS_THE_DRAFT = """

def _drops_the_draft(stream_generate):
    def stream_generate_without_draft(model, tokenizer, prompt, **kwargs):
        kwargs.pop("draft_model", None)
        kwargs.pop("num_draft_tokens", None)
        return stream_generate(model, tokenizer, prompt, **kwargs)

    return stream_generate_without_draft


stream_generate = _drops_the_draft(stream_generate)
"""


def build_wrapped_mlx_lm(folder: Path, mode: str = "dropdraft") -> tuple[Path, str]:
    """The installed mlx-lm repacked as ``<next patch>+<mode>`` whose SD arm drops the draft model; (wheel, version).

    Its dependencies are not declared: the night's venv sees them in the shared site.
    """
    installed = metadata.distribution("mlx-lm")
    major, minor, patch = (int(part) for part in installed.version.split(".")[:3])
    version = f"{major}.{minor}.{patch + 1}+{mode}"
    info = f"mlx_lm-{version}.dist-info"
    files: dict[str, bytes] = {}
    for file in installed.files or []:
        if file.parts[0] == "mlx_lm" and file.suffix == ".py":
            files[str(file)] = Path(str(file.locate())).read_bytes()
    files["mlx_lm/__init__.py"] += DROPS_THE_DRAFT.encode()
    metadata_text = f"Metadata-Version: 2.1\nName: mlx-lm\nVersion: {version}\n"
    wheel_text = "Wheel-Version: 1.0\nGenerator: test_gate_act\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files |= {f"{info}/METADATA": metadata_text.encode(), f"{info}/WHEEL": wheel_text.encode()}
    return _write_wheel(folder / f"mlx_lm-{version}-py3-none-any.whl", info, files), version


def build_library(folder: Path, name: str, version: str) -> Path:
    """An empty pure-Python library's wheel: something an engine depends on, released on its own."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {f"{module}/__init__.py": f"__version__ = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test_gate_act\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}  # fmt: skip
    return _write_wheel(folder / f"{module}-{version}-py3-none-any.whl", info, files)


def _write_wheel(path: Path, info: str, files: Mapping[str, bytes | str]) -> Path:
    """``files`` as a wheel at ``path``, with the RECORD that lists them."""
    contents = {name: content.encode() if isinstance(content, str) else content for name, content in files.items()}
    record = []
    for name, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    contents[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in contents.items():
            archive.writestr(name, data)
    return path
