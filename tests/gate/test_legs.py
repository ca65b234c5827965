"""[tool.specdec.gate]: what each leg measures, the profile check, and the servers the gate starts."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import httpx
import pytest

from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError
from pytest_specdec.gate.legs import GateConfig, LegConfig, check_profile, leg_server, read_gate_config

from .conftest import write_pyproject


def test_an_unconfigured_repository_has_optional_legs_on_the_embedded_profile(tmp_path: Path) -> None:
    config = read_gate_config(write_pyproject(tmp_path, "[project]\nname = 'x'\n"))
    leg = config.leg("mlx")
    assert leg == LegConfig("mlx")
    assert not leg.required
    assert config.packages("mlx") == ["mlx", "mlx-lm"]
    assert config.packages("mtplx") == ["mtplx"], "mtplx's release is the server's, not httpx's"


def test_legs_are_read_with_their_servers(tmp_path: Path) -> None:
    config = read_gate_config(
        write_pyproject(
            tmp_path,
            '[tool.specdec.gate]\nupgrade-servers = "brew upgrade ollama"\n'
            '[tool.specdec.gate.legs.ollama]\nrequired = true\nprofile = "seed"\nserve = true\n'
            '[tool.specdec.gate.legs.mtplx]\nserve = true\nmodel = "/models/q"\npackages = []\n',
        )
    )
    ollama = config.leg("ollama")
    assert ollama.required
    assert ollama.profile == "seed"
    assert ollama.serve is not None
    assert ollama.serve.command == ("ollama", "serve")
    assert ollama.serve.environment == {"OLLAMA_HOST": "127.0.0.1:{port}"}
    assert ollama.serve.url_option == "host"
    assert config.packages("mtplx") == []
    assert config.packages("ollama") == ["ollama"]
    assert config.upgrade_servers == "brew upgrade ollama"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tool.specdec.gate]\nallow-embeded = true\n", "[tool.specdec.gate] has unknown key 'allow-embeded'"),
        ("[tool.specdec.gate.legs.mlx]\nrequired = 'yes'\n", "required = 'yes' must be a bool"),
        ("[tool.specdec.gate.legs.mlx]\nserve = true\n", "the gate knows how to start the servers of mtplx, ollama"),
        ("[tool.specdec.gate.legs.mlx]\ntargets = 'benchmarks/'\n", "targets = 'benchmarks/' must be a list"),
        ("[tool.specdec.gate]\nlegs = 3\n", "legs must be a table"),
        ("[tool.specdec.gate]\npublish-site = 'yes'\n", "publish-site = 'yes' must be a bool"),
        ("[tool.specdec.gate]\nacceptance-drop = 10\n", "acceptance-drop = 10 must be a fraction in [0, 1)"),
        ("[tool.specdec.gate]\nacceptance-drop = 'big'\n", "acceptance-drop = 'big' must be a fraction"),
        ("[tool.specdec.gate]\nruns-on = 'macos-14'\n", "runs-on = 'macos-14' must be a list of strings"),
        ("[tool.specdec.gate]\nruns-on = []\n", "runs-on = [] must name the runner's labels, e.g. ['self-hosted'"),
    ],
)
def test_bad_gate_tables_are_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SpecdecUsageError, match=r"^[^\n]*$") as error:
        read_gate_config(write_pyproject(tmp_path, text))
    assert message in str(error.value)


def test_the_synthetic_pair_is_refused_on_a_self_hosted_runner_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    leg = LegConfig("mlx")
    monkeypatch.setenv("RUNNER_ENVIRONMENT", "github-hosted")
    assert check_profile(GateConfig(), leg) == "embedded"
    monkeypatch.setenv("RUNNER_ENVIRONMENT", "self-hosted")
    with pytest.raises(SpecdecUsageError, match=r"set profile = \"seed\".*or allow-embedded = true"):
        check_profile(GateConfig(), leg)
    assert check_profile(GateConfig(allow_embedded=True), leg) == "embedded"
    assert check_profile(GateConfig(), LegConfig("mlx", profile="gemma")) == "gemma"
    assert check_profile(GateConfig(), LegConfig("mlx", pytest_args="--specdec-model=/m")) == "user"
    assert check_profile(GateConfig(own_models=frozenset({"mlx"})), leg) == "user"


def test_a_managed_server_runs_for_the_leg_and_its_log_is_kept(tmp_path: Path) -> None:
    command = (sys.executable, "-m", "pytest_specdec.backends.standin", "mtplx", "--port", "{port}")
    config = read_gate_config(
        write_pyproject(tmp_path, f"[tool.specdec.gate.legs.mtplx]\nserve = {list(command)!r}\n".replace("'", '"'))
    )
    logs = tmp_path / "logs"
    with leg_server(config.leg("mtplx"), logs) as arguments:
        (argument,) = arguments
        assert argument.startswith("--specdec-backend-option=url=http://127.0.0.1:")
        url = argument.split("=", 2)[2]
        assert httpx.get(url + "/health", timeout=10).json()["ok"] is True
    with pytest.raises(httpx.HTTPError):
        httpx.get(url + "/health", timeout=2)
    (log,) = logs.iterdir()
    assert "mtplx stand-in listening on" in log.read_text()


def test_a_server_that_cannot_start_is_one_line_with_what_it_said(tmp_path: Path) -> None:
    leg = LegConfig(
        "mtplx",
        serve=read_gate_config(
            write_pyproject(
                tmp_path,
                '[tool.specdec.gate.legs.mtplx]\nserve = ["python3", "-c", "raise SystemExit(\'no model here\')"]\n',
            )
        )
        .leg("mtplx")
        .serve,
    )
    with (
        pytest.raises(BackendUnavailable, match=r"mtplx-server exited before it was ready .*: no model here"),
        leg_server(leg, tmp_path / "logs"),
    ):
        pass


def test_serve_true_for_mtplx_needs_its_model(tmp_path: Path) -> None:
    config = read_gate_config(write_pyproject(tmp_path, "[tool.specdec.gate.legs.mtplx]\nserve = true\n"))
    with pytest.raises(SpecdecUsageError, match=r'needs model = "\.\.\."'), leg_server(config.leg("mtplx"), tmp_path):
        pass


def test_a_runs_profile_input_overrides_the_legs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_pyproject(tmp_path, '[tool.specdec.gate.legs.mlx]\nprofile = "seed"\n')
    assert read_gate_config(tmp_path).leg("mlx").profile == "seed"
    monkeypatch.setenv("SPECDEC_GATE_PROFILE", "gemma")
    config = read_gate_config(tmp_path)
    assert config.leg("mlx").profile == "gemma"
    assert config.leg("llama-cpp").profile == "gemma"


def test_managed_server_logs_are_kept_where_the_gate_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_specdec.backends.server_process import ServerProcess

    monkeypatch.setenv("SPECDEC_SERVER_LOGS", str(tmp_path / "server-logs"))
    server = ServerProcess(
        "web", lambda port: [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], ready_path="/"
    ).start()
    server.stop()
    (log,) = (tmp_path / "server-logs").iterdir()
    assert log.name.startswith("web-"), "a clean stop keeps the log for the artifact"


FLEET = """
[tool.specdec.gate.legs.mlx]
required = true
[tool.specdec.gate.legs.ollama]

[tool.specdec.gate.runners.specdec-m1max-64]
legs = ["mlx", "ollama"]
[tool.specdec.gate.runners.specdec-m4pro-48]
legs = ["mlx"]
"""


def test_a_fleet_names_each_runner_with_its_legs(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.specdec.gate]\n" + FLEET)
    config = read_gate_config(tmp_path)
    assert config.labels == ("specdec-m1max-64", "specdec-m4pro-48")
    assert config.runner_legs("specdec-m4pro-48") == ("mlx",)
    assert config.runner_legs("") == ("mlx", "ollama"), "no runner named: every leg"
    (tmp_path / "pyproject.toml").write_text("[tool.specdec.gate.legs.mlx]\n")
    assert read_gate_config(tmp_path).labels == ("",), "without a fleet: the one runner"


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('[tool.specdec.gate.runners.m4]\nlegs = ["llama-server"]\n', "'llama-server' is not one"),
        ("[tool.specdec.gate.runners.m4]\nlegs = []\n", "it names none"),
        ('[tool.specdec.gate.runners."m4--pro"]\nlegs = ["mlx"]\n', "not a runner label"),
        ('[tool.specdec.gate.runners.m4]\nlegs = ["mlx"]\nos = "15"\n', "unknown key 'os'"),
        ('[tool.specdec.gate.runners.m4]\nlegs = ["mlx"]\nmachine-class = 3\n', "must be a str"),
    ],
)
def test_a_bad_runner_table_is_one_line(tmp_path: Path, table: str, said: str) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.specdec.gate]\n[tool.specdec.gate.legs.mlx]\n" + table)
    with pytest.raises(SpecdecUsageError, match=re.escape(said)):
        read_gate_config(tmp_path)


def test_the_gates_acceptance_drop_reaches_every_legs_pytest(tmp_path: Path) -> None:
    from pytest_specdec.gate.runs import leg_arguments

    config = read_gate_config(write_pyproject(tmp_path, "[tool.specdec.gate]\nacceptance-drop = 0.2\n\n"
                                              "[tool.specdec.gate.legs.simulated]\n"))  # fmt: skip
    assert config.acceptance_drop == 0.2
    assert "--specdec-acceptance-drop=0.2" in leg_arguments(config, config.leg("simulated"), [])
    unset = read_gate_config(write_pyproject(tmp_path, "[tool.specdec.gate.legs.simulated]\n"))
    assert not any("acceptance-drop" in a for a in leg_arguments(unset, unset.leg("simulated"), []))
