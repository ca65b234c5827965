"""Settings: precedence of the three sources, profiles, and one-line errors for bad values."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_specdec.backends.base import ModelPair
from pytest_specdec.config import Settings, build_settings, read_pyproject, requested_backend
from pytest_specdec.embedded.packaged import GEMMA_GGUF
from pytest_specdec.errors import SpecdecUsageError


def settings(
    cli: Mapping[str, object] = {}, ini: Mapping[str, object] = {}, pyproject: Mapping[str, object] = {}
) -> Settings:
    return build_settings(cli.get, ini.get, pyproject)


def test_command_line_beats_ini_beats_pyproject_beats_default() -> None:
    assert settings().max_tokens == 32
    assert settings(pyproject={"max_tokens": 40}).max_tokens == 40
    assert settings(ini={"specdec_max_tokens": "50"}, pyproject={"max_tokens": 40}).max_tokens == 50
    assert settings(cli={"max_tokens": "60"}, ini={"specdec_max_tokens": "50"}).max_tokens == 60


def test_backend_tables_give_the_model_pair_and_options() -> None:
    pyproject = {
        "backend": "simulated",
        "simulated": {"model": "t", "draft": "d", "num_draft": 5, "options": {"speedup": 2}},
    }
    got = settings(pyproject=pyproject)
    assert got.pair == ModelPair("t", "d")
    assert got.num_draft == 5
    assert got.backend_options == {"speedup": "2"}
    assert settings(cli={"backend_option": ("speedup=3",)}, pyproject=pyproject).backend_options == {"speedup": "3"}


@pytest.mark.parametrize(("text", "seconds"), [("600", 600.0), ("90s", 90.0), ("10m", 600.0), ("1.5h", 5400.0)])
def test_a_time_budget_reads_seconds_minutes_or_hours(text: str, seconds: float) -> None:
    assert settings(cli={"time_budget": text}).time_budget_s == seconds


def test_profiles_choose_models_per_backend() -> None:
    gemma = settings(cli={"backend": "llama-cpp", "profile": "gemma"})
    assert gemma.pair == ModelPair(GEMMA_GGUF, None)
    assert gemma.profile == "gemma"
    with pytest.raises(SpecdecUsageError, match="unknown profile 'nope'"):
        settings(cli={"profile": "nope"})
    with pytest.raises(SpecdecUsageError, match="has no models for backend 'simulated'"):
        settings(cli={"backend": "simulated", "profile": "gemma"})


@pytest.mark.parametrize(
    ("cli", "message"),
    [
        ({"confidence": "1.5"}, "outside \\(0, 1\\)"),
        ({"max_tokens": "x"}, "not a valid int for --specdec-max-tokens"),
        ({"min_trials": "1"}, "below 2"),
        ({"plot": "out.txt"}, "must name a .png file"),
        ({"backend_option": ("novalue",)}, "must look like KEY=VALUE"),
        ({"backend": "nonsense"}, "nonsense"),
        ({"time_budget": "soon"}, "--specdec-time-budget 'soon' is not a duration — give one such as 600, 90s, 10m"),
        ({"time_budget": "0m"}, "'0m' is not a duration"),
    ],
)
def test_bad_values_are_one_line_errors(cli: Mapping[str, object], message: str) -> None:
    with pytest.raises(SpecdecUsageError, match=message):
        settings(cli=cli)


def test_pyproject_is_read_from_the_rootdir_and_bad_toml_is_named(tmp_path: Path) -> None:
    assert read_pyproject(tmp_path) == {}
    (tmp_path / "pyproject.toml").write_text('[tool.specdec]\nbackend = "simulated"\n')
    assert read_pyproject(tmp_path) == {"backend": "simulated"}
    (tmp_path / "pyproject.toml").write_text("[tool.specdec\n")
    with pytest.raises(SpecdecUsageError, match="is not valid TOML"):
        read_pyproject(tmp_path)


def test_the_backend_is_found_on_a_command_line_before_pytest_parses_it() -> None:
    assert requested_backend(["-q", "--backend", "llama-cpp"]) == "llama-cpp"
    assert requested_backend(["--specdec-backend=mlx"]) == "mlx"
    assert requested_backend(["-q"]) is None
