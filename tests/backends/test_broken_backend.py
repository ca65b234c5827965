"""A third-party backend that cannot be loaded: one line naming its distribution and entry point, and every other
backend keeps working (issue #51: it used to stop every specdec command)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLAIM = """
import pytest

@pytest.mark.speedup(max=50.0)
def test_sd(specdec):
    specdec.compare(category="copy")
"""


@pytest.fixture
def broken_site(tmp_path: Path) -> dict[str, str]:
    """A distribution declaring a backend whose module raises on import, laid out as pip would install it."""
    site = tmp_path / "site"
    info = site / "specdec_broken-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: specdec-broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest_specdec.backends]\nbroken = specdec_broken:SPEC\n")
    (site / "specdec_broken.py").write_text("raise RuntimeError('its native library is missing')\n")
    (tmp_path / "test_claim.py").write_text(CLAIM)
    return {**os.environ, "PYTHONPATH": str(site)}


def run(arguments: list[str], environment: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(arguments, capture_output=True, text=True, env=environment, cwd=cwd, check=False, timeout=600)


LINE = (
    "the backend 'broken' of specdec-broken (entry point specdec_broken:SPEC) cannot be loaded: RuntimeError: its "
    "native library is missing — fix or uninstall specdec-broken"
)


def test_the_other_backends_keep_working_and_the_broken_one_is_one_line(
    broken_site: dict[str, str], tmp_path: Path
) -> None:
    listed = run([sys.executable, "-m", "pytest_specdec.cli", "backends"], broken_site, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert f"warning: {LINE}" in listed.stdout
    assert "simulated: " in listed.stdout
    asked = run([sys.executable, "-m", "pytest_specdec.cli", "backends", "broken"], broken_site, tmp_path)
    assert (asked.returncode, asked.stderr.strip()) == (2, f"pytest-specdec: error: {LINE}")
    measured = run([sys.executable, "-m", "pytest", "test_claim.py", "-p", "no:cacheprovider", "--backend=simulated",
                    "--specdec-max-trials=8"], broken_site, tmp_path)  # fmt: skip
    assert measured.returncode == 0, measured.stdout[-2000:] + measured.stderr
    assert f"specdec: warning: {LINE}" in " ".join(measured.stdout.split())
    refused = run([sys.executable, "-m", "pytest", "test_claim.py", "-p", "no:cacheprovider", "--backend=broken"],
                  broken_site, tmp_path)  # fmt: skip
    assert refused.returncode != 0
    assert "Traceback" not in refused.stdout + refused.stderr
    assert LINE in " ".join((refused.stdout + refused.stderr).split())
