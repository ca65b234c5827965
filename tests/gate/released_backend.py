"""A test backend package in two releases whose behaviour differs, as wheels built by hand.

``specdec-testbackend`` registers ``testbackend`` through the ``pytest_specdec.backends``
entry point; it is the simulated backend with its true speedup fixed by the release.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

BACKEND_SOURCE = '''"""A backend whose releases differ: SD loses in 1.0 and wins in 1.1 (a test package)."""
from dataclasses import replace
from pytest_specdec.backends.base import BackendSpec
from pytest_specdec.backends.simulated.adapter import SimulatedBackend

VERSION = "{version}"


class ReleasedBackend(SimulatedBackend):
    name = "testbackend"

    def __init__(self, pair, options):
        super().__init__(pair, {{"speedup": "{speedup}", "counter_scale": "{counter_scale}", "release": VERSION,
                                 **options}})

    def fingerprint(self):
        found = super().fingerprint()
        return replace(found, backend=self.name, release="specdec-testbackend " + VERSION,
                       versions={{"specdec-testbackend": VERSION}})


SPEC = BackendSpec(name="testbackend", target="specdec_testbackend:ReleasedBackend",
                   distributions=("specdec-testbackend",), in_process=True)
'''


def build_wheel(folder: Path, version: str, speedup: float, counter_scale: float = 1.0) -> Path:
    """A pure-Python wheel of specdec-testbackend, written by hand (no build tools needed).

    ``counter_scale`` below 1 makes the release report shorter decode times for SD than it
    spent: a change of what its counters cover, not of its speed.
    """
    info = f"specdec_testbackend-{version}.dist-info"
    files = {
        "specdec_testbackend/__init__.py": BACKEND_SOURCE.format(
            version=version, speedup=speedup, counter_scale=counter_scale
        ),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: specdec-testbackend\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test_gate_act\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[pytest_specdec.backends]\ntestbackend = specdec_testbackend:SPEC\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = folder / f"specdec_testbackend-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path
