"""What the gate measures on this runner: the ``[tool.specdec.gate]`` table.

::

    [tool.specdec.gate]
    allow-embedded = false                  # the synthetic pair as a gate profile on a self-hosted runner
    upgrade-servers = "brew upgrade ollama llama.cpp"   # how server releases enter (run by the upgrade step)
    alert-on-erosion = true                 # open an issue when a conclusion creeps toward its bound (false: never)

    [tool.specdec.gate.legs.ollama]
    required = true                         # unmeasurable fails the gate (optional legs warn)
    profile = "seed"                        # --specdec-profile for this leg
    serve = true                            # the gate starts the backend's server (its spec's recipe)
    pytest-args = "-k 'not claim_e'"
    packages = ["ollama"]                   # what the upgrade step moves (default: the backend's)

A fleet names each self-hosted runner by its label, with the legs it measures (no ``runners`` table:
one runner, every leg)::

    [tool.specdec.gate.runners.specdec-m1max-64]
    legs = ["mlx", "ollama"]
    [tool.specdec.gate.runners.specdec-m4pro-48]
    legs = ["mlx"]

A leg that is not configured is optional, runs ``benchmarks/`` with the repository's
profile and starts no server. ``serve = true`` uses the command the backend's spec gives
(``ollama serve``; ``mtplx serve --model MODEL``); a list is a command of one's own,
where ``{port}`` and ``{model}`` are filled in.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_specdec.backends import registered_backends
from pytest_specdec.backends.base import ServeRecipe
from pytest_specdec.backends.server_process import ServerProcess, free_port
from pytest_specdec.config import read_pyproject
from pytest_specdec.errors import SpecdecUsageError

EMBEDDED_PROFILES = ("embedded", "embedded-1b")
DEFAULT_TARGETS = ("benchmarks/",)  # a leg's tests when it names none: this project's layout
# The measuring jobs' runner labels when [tool.specdec.gate] names none (gate.sh's plan step has the same default).
DEFAULT_RUNS_ON = ("self-hosted", "macOS", "ARM64")
PROFILE_VARIABLE = "SPECDEC_GATE_PROFILE"  # the workflow's profile input
RUNNER_VARIABLE = "SPECDEC_GATE_RUNNER"  # the runner label a leg's job runs for (empty: the one runner)
# A runner's label: GitHub's label characters, never "--" (it separates runner and leg in artifact names).
RUNNER_LABEL = re.compile(r"[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)*")


@dataclass(frozen=True)
class RunnerConfig:
    """One self-hosted runner of a fleet: its label and the legs it measures.

    ``machine_class`` is for the act tests alone (two labels on one host, each its own class): gate.sh exports it
    as ``SPECDEC_MACHINE_CLASS`` for that label's jobs and refuses it on a real runner, where the class is detected.
    """

    label: str
    legs: tuple[str, ...]
    machine_class: str = ""


@dataclass(frozen=True)
class LegConfig:
    """One backend's leg of the gate."""

    backend: str
    required: bool = False
    profile: str | None = None
    model: str = ""
    pytest_args: str = ""
    targets: tuple[str, ...] = DEFAULT_TARGETS
    packages: tuple[str, ...] | None = None  # None: the backend's own; () installs and upgrades nothing
    serve: ServeRecipe | None = None


@dataclass(frozen=True)
class GateConfig:
    """The gate's settings for this repository."""

    legs: Mapping[str, LegConfig] = field(default_factory=dict)
    allow_embedded: bool = False
    upgrade_servers: str = ""
    alert_on_erosion: bool = True
    window_minutes: int = 0  # a night's time on the runner (0: no budget)
    ungated_nights: int = 3  # nights results may wait for acceptance before the gate goes red
    undecided_nights: int = 3  # nights a claim may stay undecided before an issue opens
    acceptance_drop: float | None = None  # --specdec-acceptance-drop for every leg (None: the plugin's 0.10)
    default_profile: str = "embedded"  # [tool.specdec] profile
    own_models: frozenset[str] = frozenset()  # backends with a model in [tool.specdec.<backend>]
    profile_input: str = ""  # the workflow's profile input for this run (SPECDEC_GATE_PROFILE): wins over every leg's
    runners: Mapping[str, RunnerConfig] = field(default_factory=dict)  # a fleet, by label (empty: one runner)
    runs_on: tuple[str, ...] = DEFAULT_RUNS_ON  # the measuring jobs' runner labels (a fleet adds each runner's own)

    def runner_legs(self, label: str) -> tuple[str, ...]:
        """The legs one runner measures (``""``, or a label of no fleet: every configured leg)."""
        runner = self.runners.get(label)
        return runner.legs if runner is not None else tuple(sorted(self.legs))

    @property
    def labels(self) -> tuple[str, ...]:
        """Each runner's label, in order (``("",)``: the one runner of a repository without a fleet)."""
        return tuple(sorted(self.runners)) or ("",)

    def leg(self, backend: str) -> LegConfig:
        """The configured leg, or an optional one with the defaults; a run's profile input wins."""
        leg = self.legs.get(backend) or LegConfig(backend)
        return replace(leg, profile=self.profile_input) if self.profile_input else leg

    def packages(self, backend: str) -> list[str]:
        """The packages of one leg: its ``packages``, else its backend's distributions."""
        packages = self.leg(backend).packages
        return list(_distributions(backend) if packages is None else packages)


def _distributions(backend: str) -> tuple[str, ...]:
    """What the upgrade step moves when a leg names no packages: its spec's upgrade packages, else its distributions."""
    spec = registered_backends().get(backend)
    if spec is None:
        return ()
    return spec.distributions if spec.upgrade_packages is None else spec.upgrade_packages


GATE_KEYS = {"allow-embedded", "upgrade-servers", "alert-on-erosion", "legs", "window-minutes", "ungated-nights",
             "undecided-nights", "publish-site", "runners", "acceptance-drop", "runs-on"}  # fmt: skip
RUNNER_KEYS = {"legs", "machine-class"}
LEG_KEYS = {"required", "profile", "model", "pytest-args", "targets", "packages", "serve", "serve-env", "ready",
            "url-option"}  # fmt: skip


def _check_keys(table: Mapping[str, object], known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise SpecdecUsageError(f"{where} has unknown key {unknown[0]!r} — known keys: {', '.join(sorted(known))}")


def _typed(value: object, kind: type, where: str, what: str) -> object:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SpecdecUsageError(f"{where} {what} = {value!r} must be a {kind.__name__}")
    return value


def _count(table: Mapping[str, object], key: str, default: int) -> int:
    value = int(str(_typed(table.get(key, default), int, "[tool.specdec.gate]", key)))
    if value < 0:
        raise SpecdecUsageError(f"[tool.specdec.gate] {key} = {value} must not be negative")
    return value


def _share(table: Mapping[str, object], key: str) -> float | None:
    """A fraction in [0, 1) (``acceptance-drop = 0.10``: 10 points), or ``None`` when the table does not set it."""
    if key not in table:
        return None
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) < 1.0:
        raise SpecdecUsageError(f"[tool.specdec.gate] {key} = {value!r} must be a fraction in [0, 1), e.g. 0.10")
    return float(value)


def _strings(value: object, where: str, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecdecUsageError(f"{where} {what} = {value!r} must be a list of strings")
    return tuple(value)


def _recipe(backend: str, table: Mapping[str, object], where: str) -> ServeRecipe | None:
    serve = table.get("serve", False)
    if serve is False:
        return None
    known = _known_servers()
    if serve is True:
        if backend not in known:
            raise SpecdecUsageError(
                f"{where} serve = true: the gate knows how to start the servers of {', '.join(sorted(known))} only "
                '— give the command as a list, e.g. serve = ["my-server", "--port", "{port}"]'
            )
        recipe = known[backend]
    else:  # a command of one's own; a known server's readiness, environment and option still apply
        recipe = replace(known.get(backend, ServeRecipe(())), command=_strings(serve, where, "serve"))
    environment = table.get("serve-env", recipe.environment)
    if not isinstance(environment, dict) or not all(isinstance(v, str) for v in environment.values()):
        raise SpecdecUsageError(f'{where} serve-env = {environment!r} must be a table of NAME = "value"')
    return ServeRecipe(
        recipe.command,
        dict(environment),
        str(_typed(table.get("ready", recipe.ready), str, where, "ready")),
        str(_typed(table.get("url-option", recipe.url_option), str, where, "url-option")),
    )


def _known_servers() -> dict[str, ServeRecipe]:
    """The servers the gate can start: each registered backend's serve recipe."""
    return {name: spec.serve for name, spec in registered_backends().items() if spec.serve is not None}


def _leg(backend: str, table: object) -> LegConfig:
    where = f"[tool.specdec.gate.legs.{backend}]"
    if not isinstance(table, dict):
        raise SpecdecUsageError(f"{where} must be a table")
    _check_keys(table, LEG_KEYS, where)
    # The backend is not looked up here: a leg may name one that its own package (installed by set-up) provides.
    profile = table.get("profile")
    return LegConfig(
        backend=backend,
        required=bool(_typed(table.get("required", False), bool, where, "required")),
        profile=None if profile is None else str(_typed(profile, str, where, "profile")),
        model=str(_typed(table.get("model", ""), str, where, "model")),
        pytest_args=str(_typed(table.get("pytest-args", ""), str, where, "pytest-args")),
        targets=_strings(table.get("targets", list(DEFAULT_TARGETS)), where, "targets"),
        packages=_strings(table["packages"], where, "packages") if "packages" in table else None,
        serve=_recipe(backend, table, where),
    )


def _runners(table: object, legs: Mapping[str, LegConfig]) -> dict[str, RunnerConfig]:
    if not isinstance(table, dict):
        raise SpecdecUsageError("[tool.specdec.gate] runners must be a table ([tool.specdec.gate.runners.LABEL])")
    runners = {}
    for label, runner in table.items():
        where = f"[tool.specdec.gate.runners.{label}]"
        if not RUNNER_LABEL.fullmatch(label):
            raise SpecdecUsageError(
                f"{where}: {label!r} is not a runner label this gate can use — letters, digits, '.', '_' and single "
                "'-' (\"--\" separates runner and leg in artifact names), as in specdec-m1max-64"
            )
        if not isinstance(runner, dict):
            raise SpecdecUsageError(f"{where} must be a table")
        _check_keys(runner, RUNNER_KEYS, where)
        named = _strings(runner.get("legs", []), where, "legs")
        unknown = [leg for leg in named if leg not in legs]
        if not named or unknown:
            raise SpecdecUsageError(
                f"{where} legs = {list(named)!r} must name configured legs ([tool.specdec.gate.legs.NAME]): "
                + (f"{unknown[0]!r} is not one" if unknown else "it names none")
            )
        machine = str(_typed(runner.get("machine-class", ""), str, where, "machine-class"))
        runners[label] = RunnerConfig(label, named, machine)
    return runners


def read_gate_config(rootdir: Path) -> GateConfig:
    """``[tool.specdec.gate]`` of ``rootdir/pyproject.toml``; one line naming a bad key or value."""
    specdec = read_pyproject(rootdir)
    table = specdec.get("gate", {})
    if not isinstance(table, dict):
        raise SpecdecUsageError("[tool.specdec] gate must be a table ([tool.specdec.gate])")
    _check_keys(table, GATE_KEYS, "[tool.specdec.gate]")
    legs = table.get("legs", {})
    if not isinstance(legs, dict):
        raise SpecdecUsageError("[tool.specdec.gate] legs must be a table ([tool.specdec.gate.legs.BACKEND])")
    profile = specdec.get("profile", "embedded")
    # publish-site is read by the workflow's shell step alone (.github/scripts/gate.sh): only its type is checked here
    _typed(table.get("publish-site", False), bool, "[tool.specdec.gate]", "publish-site")
    configured = {backend: _leg(backend, leg) for backend, leg in legs.items()}
    own = frozenset(name for name, value in specdec.items() if isinstance(value, dict) and value.get("model"))
    return GateConfig(
        legs=configured,
        allow_embedded=bool(_typed(table.get("allow-embedded", False), bool, "[tool.specdec.gate]", "allow-embedded")),
        upgrade_servers=str(_typed(table.get("upgrade-servers", ""), str, "[tool.specdec.gate]", "upgrade-servers")),
        alert_on_erosion=bool(
            _typed(table.get("alert-on-erosion", True), bool, "[tool.specdec.gate]", "alert-on-erosion")
        ),
        window_minutes=_count(table, "window-minutes", 0),
        ungated_nights=_count(table, "ungated-nights", 3),
        undecided_nights=_count(table, "undecided-nights", 3),
        acceptance_drop=_share(table, "acceptance-drop"),
        default_profile=str(profile),
        own_models=own,
        profile_input=os.environ.get(PROFILE_VARIABLE, "").strip(),
        runners=_runners(table.get("runners", {}), configured),
        runs_on=_runs_on(table),
    )


def _runs_on(table: Mapping[str, object]) -> tuple[str, ...]:
    labels = _strings(table.get("runs-on", list(DEFAULT_RUNS_ON)), "[tool.specdec.gate]", "runs-on")
    if not labels or not all(label.strip() for label in labels):
        raise SpecdecUsageError(
            f"[tool.specdec.gate] runs-on = {list(labels)!r} must name the runner's labels, e.g. "
            f"{list(DEFAULT_RUNS_ON)!r} (pytest-specdec gate init --runner KIND writes them)"
        )
    return labels


def self_hosted() -> bool:
    """Whether this job runs on a self-hosted GitHub Actions runner (``RUNNER_ENVIRONMENT``)."""
    return os.environ.get("RUNNER_ENVIRONMENT", "") == "self-hosted"


def _named_profile(arguments: str) -> str | None:
    words = shlex.split(arguments)
    for index, word in enumerate(words):
        if word.startswith("--specdec-profile="):
            return word.split("=", 1)[1]
        if word == "--specdec-profile" and index + 1 < len(words):
            return words[index + 1]
    return None


def effective_profile(config: GateConfig, leg: LegConfig, extra: str = "") -> str:
    """The profile a leg's run ends up with: the last one named wins, as on pytest's command line."""
    named = _named_profile(extra) or _named_profile(leg.pytest_args)
    if named:
        return named
    if leg.profile:
        return leg.profile
    if "--specdec-model" in leg.pytest_args or leg.backend in config.own_models:
        return "user"
    return config.default_profile


def check_profile(config: GateConfig, leg: LegConfig, extra: str = "") -> str:
    """The leg's profile; the synthetic pair is refused on a self-hosted runner unless allowed."""
    profile = effective_profile(config, leg, extra)
    if profile in EMBEDDED_PROFILES and self_hosted() and not config.allow_embedded:
        raise SpecdecUsageError(
            f"the {leg.backend} leg would measure the synthetic {profile!r} pair on a self-hosted runner — set "
            f'profile = "seed" (or a [tool.specdec.profiles.NAME] with your models) in '
            f"[tool.specdec.gate.legs.{leg.backend}], or allow-embedded = true in [tool.specdec.gate]"
        )
    return profile


@contextmanager
def leg_server(leg: LegConfig, logs: Path) -> Iterator[list[str]]:
    """Start the leg's server (if it has one) and give the pytest arguments that point at it."""
    recipe = leg.serve
    if recipe is None:
        yield []
        return
    if "{model}" in " ".join(recipe.command) and not leg.model:
        raise SpecdecUsageError(
            f'[tool.specdec.gate.legs.{leg.backend}] serve needs model = "..." (the model the server loads)'
        )

    def fill(text: str, port: int) -> str:  # only these two: other braces (a JSON argument) stay as they are
        return text.replace("{port}", str(port)).replace("{model}", leg.model)

    def command(port: int) -> list[str]:
        return [fill(part, port) for part in recipe.command]

    port = free_port()  # picked here: the environment may name it too (a host variable)
    environment = {key: fill(value, port) for key, value in recipe.environment.items()}
    server = ServerProcess(
        f"{leg.backend}-server", command, ready_path=recipe.ready, environment=environment, port=port, log_dir=logs
    ).start()
    try:
        yield [f"--specdec-backend-option={recipe.url_option}={server.base_url}"]
    finally:
        server.stop(keep_log=True)
