"""The gate takes the servers Mac owners run as legs: ``pytest-specdec gate measure`` and ``night`` on an ``lmstudio`` and
an ``mlx-vlm`` leg through their stand-ins (tests/backends/test_mlx_vlm.py runs the real mlx-vlm), and on an
``mlx-server`` leg through the real mlx_lm.server."""

from __future__ import annotations

from pathlib import Path

import pytest
from gate.test_findings import specdec

from pytest_specdec.backends.mlx_vlm.standin import MlxVlmHandler
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer

CLAIM = """import pytest


@pytest.mark.speedup(min=1.0)
def test_sd_pays_off(specdec):
    specdec.compare(category="copy", max_tokens=8)
"""


def leg(backend: str, arguments: str) -> str:
    return (f'[tool.specdec.gate.legs.{backend}]\nrequired = true\ntargets = ["bench/"]\n'
            f'pytest-args = "{arguments} --specdec-min-trials=2 --specdec-max-trials=2"\n')  # fmt: skip


@pytest.mark.parametrize("backend", ["lmstudio", "mlx-vlm", "mlx-server"])
def test_a_server_leg_is_measured_and_judged_by_the_gates_own_steps(
    tmp_path: Path, engine: GenerationEngine, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    if backend == "lmstudio":
        pytest.importorskip("lmstudio")
        from pytest_specdec.backends.lmstudio.standin import DRAFT, TARGET, LmStudioHandler

        servers = [StandinServer(LmStudioHandler, engine).start()]
        arguments = (f"--specdec-model={TARGET} --specdec-draft={DRAFT} "
                     f"--specdec-backend-option host={servers[0].url.removeprefix('http://')}")  # fmt: skip
    elif backend == "mlx-server":  # the real mlx_lm.server, two of them started by the backend, the embedded pair
        pytest.importorskip("mlx_lm")
        servers, arguments = [], "--specdec-backend-option prompt_cache_size=0"
    else:
        servers = [StandinServer(MlxVlmHandler, engine, settings=s).start() for s in ({}, {"draft_kind": "mtp"})]
        arguments = (f"--specdec-model=ignored --specdec-backend-option plain_url={servers[0].url} "
                     f"--specdec-backend-option sd_url={servers[1].url}")  # fmt: skip
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", "Server-Leg-Runner")
    monkeypatch.setenv("SPECDEC_GATE_STATE", str(tmp_path / "runner-state"))  # this runner's first night
    (tmp_path / "pyproject.toml").write_text(leg(backend, arguments), encoding="utf-8")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    out = tmp_path / "artifacts" / f"specdec-{backend}"
    try:
        measured = specdec(tmp_path, "measure", "--backend", backend, "--out", str(out))
        night = specdec(tmp_path, "night", "--backend", backend, "--out", str(out))
    finally:
        for server in servers:
            server.stop()
    assert measured.returncode == 0, measured.stdout[-3000:] + measured.stderr[-2000:]
    assert f"specdec gate: {backend}: measured" in measured.stdout + night.stdout, measured.stdout[-3000:]
    assert "not measurable" not in night.stdout, night.stdout[-3000:]
    assert "not yet gated: 1 result(s) await acceptance" in night.stdout, "a first night: its result awaits acceptance"
