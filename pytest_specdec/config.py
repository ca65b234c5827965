"""Settings: one frozen value built from command line, ini file and ``[tool.specdec]``.

Precedence, highest first: a command-line option, its ini twin (``specdec_*`` in
``pytest.ini`` / ``[tool.pytest.ini_options]``), the ``[tool.specdec]`` table of
``pyproject.toml``, the built-in default. ``[tool.specdec.<backend>]`` tables hold
per-backend model pairs::

    [tool.specdec]
    backend = "mlx"
    max_tokens = 64

    [tool.specdec.mlx]
    model = "mlx-community/Qwen2.5-7B-Instruct-4bit"
    draft = "mlx-community/Qwen2.5-0.5B-Instruct-4bit"
    num_draft = 3
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_specdec.backends import backend_spec, check_options, known_profiles, profile_pairs, registered_backends
from pytest_specdec.backends.base import ModelPair
from pytest_specdec.embedded import models
from pytest_specdec.embedded.prompt_sets import PromptSet, read_prompt_file
from pytest_specdec.errors import SpecdecUsageError

Lookup = Callable[[str], object]


@dataclass(frozen=True)
class OptionDef:
    """One setting: its flag, ini twin, type and help, shared by plugin and CLI."""

    key: str
    kind: str  # "str", "int", "float", "bool", "list"
    default: object
    help: str

    @property
    def flag(self) -> str:
        """``--specdec-max-tokens``."""
        return "--specdec-" + self.key.replace("_", "-")

    @property
    def ini(self) -> str:
        """``specdec_max_tokens``."""
        return "specdec_" + self.key


OPTIONS: tuple[OptionDef, ...] = (
    OptionDef(
        "backend",
        "str",
        "mlx",
        "backend to measure: one of the registered backends (pytest-specdec backends lists them)",
    ),
    OptionDef(
        "model", "str", None, "target model: a path, a hub id, or embedded:NAME (default: the embedded synthetic pair)"
    ),
    OptionDef("draft", "str", None, "draft model for speculative decoding (same tokenizer as the target)"),
    OptionDef(
        "profile",
        "str",
        None,
        "model profile: embedded, embedded-1b, gemma, seed, or a [tool.specdec.profiles.NAME] table",
    ),
    OptionDef(
        "prompts",
        "str",
        None,
        "a prompt file (TOML or JSON Lines, relative to the rootdir) of your own named prompt sets: compare('SET') "
        "measures one (docs/writing-claims.md)",
    ),
    OptionDef(
        "time_budget",
        "str",
        None,
        "wall time for the run's comparisons, e.g. 10m: shared among the measuring tests in turns; each stops at "
        "the last look that fits its share, the distribution check counted (a CI job's limit, with room to spare)",
    ),
    OptionDef("num_draft", "int", 3, "draft tokens per speculative step (γ)"),
    OptionDef("max_tokens", "int", 32, "tokens decoded per generation (fixed budget, greedy)"),
    OptionDef("min_trials", "int", 16, "paired trials before the first look (looks come after whole prompt blocks)"),
    OptionDef("max_trials", "int", 72, "paired trials at most (rounded down to whole prompt blocks)"),
    OptionDef(
        "confidence",
        "float",
        0.98,
        "two-sided confidence of each test's interval over all its looks; (1 - confidence)/2 is the error per "
        "direction, split across the bounds a test states",
    ),
    OptionDef(
        "interval",
        "str",
        "these-prompts",
        "what the interval is about: these-prompts (the suite's prompts) or prompts-like-these (random effects)",
    ),
    OptionDef(
        "precision", "float", 0.05, "without bounds, stop once the interval half-width is this fraction of the speedup"
    ),
    OptionDef("strict", "bool", False, "fail tests whose verdict is inconclusive"),
    OptionDef(
        "near_tie",
        "float",
        0.25,
        "logit margin under which a first divergence of the arms counts as arithmetic noise (batched verify "
        "kernels moved Gemma 3 270M Q4_K_M's logits by 0.15-0.22 on a CPU)",
    ),
    OptionDef(
        "distribution_samples",
        "int",
        128,
        "continuations per arm and prompt the lossless check draws under sampling where SD and plain draw "
        "other tokens for one seed (mlx, a server you started); its two error rates are measured at 128, and "
        "fewer catch less",
    ),
    OptionDef("backend_option", "list", (), "backend-specific KEY=VALUE (repeatable)"),
    OptionDef(
        "plain_runtime",
        "str",
        None,
        "another backend whose plain decoding of the same weights is the plain arm the verdict is judged "
        "against (e.g. mlx for mtplx: is SD faster than the fastest plain way?); the backend's own plain "
        "mode is measured too, for reference",
    ),
    OptionDef("plain_model", "str", None, "the weights for --specdec-plain-runtime (default: the target)"),
    OptionDef(
        "columns",
        "str",
        None,
        "comma-separated columns of the terminal table (default: as many as fit the terminal), e.g. "
        "'category,speedup [CI],verdict'",
    ),
    OptionDef(
        "notes",
        "str",
        "few",
        "notes under the verdict table: 'few' (the first 4 per row; -v shows all) or 'all'",
    ),
    OptionDef("baselines", "str", "baselines", "baselines directory, relative to the rootdir"),
    OptionDef("update_baselines", "bool", False, "accept this run's results as the new baselines"),
    OptionDef(
        "accept_inconclusive",
        "bool",
        False,
        "with --specdec-update-baselines, accept inconclusive results "
        "too (such a baseline can never flip; without this they stay candidates)",
    ),
    OptionDef("fail_on_drift", "bool", False, "fail tests whose speedup drifted from the baseline"),
    OptionDef("drift_min_effect", "float", 0.05, "smallest relative speedup change reported as drift"),
    OptionDef(
        "acceptance_drop",
        "float",
        0.10,
        "how far below the accepted acceptance interval tonight's must lie to read 'acceptance fell' (0.10: 10 points)",
    ),
    OptionDef(
        "drift_alpha",
        "float",
        0.01,
        "how often drift may be raised on a night where nothing changed (its false-discovery rate over a run)",
    ),
    OptionDef(
        "run_history",
        "str",
        None,
        "another history file whose nights count toward this machine's run-to-run spread (the gate passes its "
        "runner's); the baselines' own history always counts",
    ),
    OptionDef("report_md", "str", None, "write a Markdown report (for $GITHUB_STEP_SUMMARY) to PATH"),
    OptionDef("json", "str", None, "write the whole run as JSON to PATH"),
    OptionDef("plot", "str", None, "write a forest plot of every comparison to PATH.png (needs matplotlib)"),
    OptionDef("benchmark_json", "str", None, "write tok/s per arm in pytest-benchmark's JSON format to PATH"),
)

OUTPUT_KEYS = ("report_md", "json", "plot", "benchmark_json")
OPTION_BY_KEY = {option.key: option for option in OPTIONS}


def backend_flags() -> tuple[tuple[str, OptionDef], ...]:
    """``(backend, option)`` for each backend option its spec gives a flag of its own (``--specdec-ollama-host``)."""
    return tuple(
        (name, OptionDef(option.flag, option.kind, None, option.help))
        for name, spec in sorted(registered_backends().items())
        for option in spec.options
        if option.flag
    )


def all_options() -> tuple[OptionDef, ...]:
    """The plugin's own options, then the backends' flags: what ``pytest --help`` lists."""
    return OPTIONS + tuple(option for _, option in backend_flags())


@dataclass(frozen=True)
class Settings:
    """Everything a run needs to know, validated."""

    backend: str = "mlx"
    pair: ModelPair = field(default_factory=lambda: ModelPair(models.DEFAULT_TARGET, models.DEFAULT_DRAFT))
    profile: str = "embedded"
    num_draft: int = 3
    num_draft_explicit: bool = False  # γ given (option, ini, [tool.specdec.BACKEND]): a backend's own default yields
    max_tokens: int = 32
    min_trials: int = 16
    max_trials: int = 72
    confidence: float = 0.98
    interval: str = "these-prompts"
    precision: float = 0.05
    strict: bool = False
    near_tie: float = 0.25
    distribution_samples: int = 128
    backend_options: Mapping[str, str] = field(default_factory=dict)
    backend_explicit: bool = False
    baselines: str = "baselines"
    update_baselines: bool = False
    accept_inconclusive: bool = False
    fail_on_drift: bool = False
    drift_min_effect: float = 0.05
    acceptance_drop: float = 0.10
    drift_alpha: float = 0.01
    run_history: str | None = None
    outputs: Mapping[str, str] = field(default_factory=dict)  # report_md / json / plot / benchmark_json → path
    columns: tuple[str, ...] = ()  # the terminal table's columns; empty: as many as fit
    notes: str = "few"  # notes under the table: the first few per row, or all
    plain_runtime: str | None = None  # a faster plain runtime on the same weights (plain arm of the verdict)
    plain_model: str | None = None
    prompts: str | None = None  # the prompt file, relative to the rootdir
    time_budget_s: float | None = None  # --specdec-time-budget in seconds


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(text: str, flag: str = "--specdec-time-budget") -> float:
    """Seconds in ``text``: ``90``, ``90s``, ``10m``, ``1.5h``.

    >>> parse_duration("10m")
    600.0
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*", text)
    seconds = float(found.group(1)) * _UNITS[found.group(2) or ""] if found else math.nan
    if not seconds > 0:
        raise SpecdecUsageError(f"{flag} {text!r} is not a duration — give one such as 600, 90s, 10m or 1.5h")
    return seconds


def _notes_choice(value: str) -> str:
    if value not in ("few", "all"):
        raise SpecdecUsageError(f"--specdec-notes {value!r}: choose 'few' (the default) or 'all'")
    return value


def read_pyproject(rootdir: Path) -> dict[str, object]:
    """The ``[tool.specdec]`` table of ``rootdir/pyproject.toml`` (empty if none)."""
    path = rootdir / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SpecdecUsageError(f"{path} is not valid TOML ({error}) — fix the file") from None
    table = document.get("tool", {}).get("specdec", {})
    if not isinstance(table, dict):
        raise SpecdecUsageError(f"{path}: [tool.specdec] must be a table")
    return table


def _convert(option: OptionDef, value: object, where: str) -> object:
    try:
        if option.kind == "int":
            if isinstance(value, bool):
                raise ValueError
            return int(str(value))
        if option.kind == "float":
            return float(str(value))
        if option.kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                raise ValueError
            return text in {"1", "true", "yes", "on"}
        if option.kind == "list":
            items = value if isinstance(value, (list, tuple)) else str(value).split()
            return tuple(str(item) for item in items)
        return str(value)
    except ValueError:
        raise SpecdecUsageError(f"{where}: {value!r} is not a valid {option.kind} for {option.flag}") from None


def _parse_backend_options(items: tuple[str, ...], table: Mapping[str, object]) -> dict[str, str]:
    parsed = {str(k): str(v) for k, v in table.items()}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecdecUsageError(f"--specdec-backend-option {item!r} must look like KEY=VALUE")
        parsed[key.strip()] = value.strip()
    return parsed


def build_settings(cli: Lookup, ini: Lookup, pyproject: Mapping[str, object]) -> Settings:
    """Merge the three sources; ``cli`` and ``ini`` return ``None`` when unset."""
    values: dict[str, object] = {}
    explicit: set[str] = set()
    for option in all_options():
        for source, where in (
            (cli(option.key), option.flag),
            (ini(option.ini), option.ini),
            (pyproject.get(option.key), "[tool.specdec]"),
        ):
            if source not in (None, "", ()):
                values[option.key] = _convert(option, source, where)
                explicit.add(option.key)
                break
        else:
            values[option.key] = option.default
    backend = str(values["backend"])
    spec = backend_spec(backend)  # an unknown name is the first thing to report
    table = pyproject.get(backend, {})
    if not isinstance(table, dict):
        raise SpecdecUsageError(
            f"[tool.specdec] {backend} = {table!r} must be a table ([tool.specdec.{backend}] with model = ..., options = ...)"
        )
    backend_table: Mapping[str, object] = table
    if "num_draft" not in explicit and "num_draft" in backend_table:
        values["num_draft"] = _convert(
            OPTION_BY_KEY["num_draft"], backend_table["num_draft"], f"[tool.specdec.{backend}]"
        )
    options_table = backend_table.get("options", {})
    if not isinstance(options_table, dict):
        raise SpecdecUsageError(
            f"[tool.specdec.{backend}] options = {options_table!r} must be a table of KEY = VALUE "
            f"([tool.specdec.{backend}.options])"
        )
    backend_options = _parse_backend_options(
        tuple(str(v) for v in values["backend_option"]),  # type: ignore[attr-defined]
        options_table,
    )
    for declared in spec.options:  # a backend option's own flag, where its spec gives one
        if declared.flag and values.get(declared.flag) not in (None, False):
            value = values[declared.flag]
            backend_options.setdefault(declared.key, str(value).lower() if declared.kind == "bool" else str(value))
    check_options(spec, backend_options)  # a typo is refused before anything loads
    if "min_trials" not in explicit and int(values["max_trials"]) < int(values["min_trials"]):  # type: ignore[call-overload]
        values["min_trials"] = values["max_trials"]  # a small budget alone means: look once, at its end
    pair, profile = _model_pair(backend, values, backend_table, pyproject)
    settings = Settings(
        backend=backend,
        pair=pair,
        profile=profile,
        num_draft=int(values["num_draft"]),  # type: ignore[call-overload]
        num_draft_explicit="num_draft" in explicit or "num_draft" in backend_table,
        max_tokens=int(values["max_tokens"]),  # type: ignore[call-overload]
        min_trials=int(values["min_trials"]),  # type: ignore[call-overload]
        max_trials=int(values["max_trials"]),  # type: ignore[call-overload]
        confidence=float(values["confidence"]),  # type: ignore[arg-type]
        interval=str(values["interval"]),
        precision=float(values["precision"]),  # type: ignore[arg-type]
        strict=bool(values["strict"]),
        near_tie=float(values["near_tie"]),  # type: ignore[arg-type]
        distribution_samples=int(values["distribution_samples"]),  # type: ignore[call-overload]
        backend_options=backend_options,
        backend_explicit="backend" in explicit,
        baselines=str(values["baselines"]),
        update_baselines=bool(values["update_baselines"]),
        accept_inconclusive=bool(values["accept_inconclusive"]),
        fail_on_drift=bool(values["fail_on_drift"]),
        drift_min_effect=float(values["drift_min_effect"]),  # type: ignore[arg-type]
        acceptance_drop=float(values["acceptance_drop"]),  # type: ignore[arg-type]
        drift_alpha=float(values["drift_alpha"]),  # type: ignore[arg-type]
        run_history=None if values["run_history"] is None else str(values["run_history"]),
        outputs={key: str(values[key]) for key in OUTPUT_KEYS if values[key]},
        columns=tuple(c.strip() for c in str(values["columns"] or "").split(",") if c.strip()),
        notes=_notes_choice(str(values["notes"])),
        plain_runtime=str(values["plain_runtime"]) if values["plain_runtime"] else None,
        plain_model=str(values["plain_model"]) if values["plain_model"] else None,
        prompts=str(values["prompts"]) if values["prompts"] else None,
        time_budget_s=parse_duration(str(values["time_budget"])) if values["time_budget"] else None,
    )
    validate(settings)
    return settings


def prompt_sets(settings: Settings, rootdir: Path) -> dict[str, PromptSet]:
    """The named sets of the prompt file the settings name (none without one); a bad file is one line."""
    if not settings.prompts:
        return {}
    return read_prompt_file(rootdir / settings.prompts, "--specdec-prompts / [tool.specdec] prompts")


def profile_pair(name: str, backend: str, pyproject: Mapping[str, object]) -> ModelPair:
    """The model pair a named profile gives ``backend``; user tables win over built-ins."""
    user_profiles = pyproject.get("profiles", {})
    user = user_profiles.get(name) if isinstance(user_profiles, dict) else None
    if isinstance(user, dict):
        table = user.get(backend)
        if isinstance(table, dict) and table.get("model"):
            draft = table.get("draft")
            return ModelPair(str(table["model"]), str(draft) if draft else None)
    elif backend in profile_pairs(name):
        return profile_pairs(name)[backend]
    known = sorted({*known_profiles(), *(user_profiles if isinstance(user_profiles, dict) else {})})
    if name not in known:
        raise SpecdecUsageError(f"unknown profile {name!r} — choose one of: {', '.join(known)} (--specdec-profile)")
    raise SpecdecUsageError(
        f"profile {name!r} has no models for backend {backend!r} — add [tool.specdec.profiles.{name}.{backend}] "
        "with model = ... (and draft = ...)"
    )


def _model_pair(
    backend: str, values: Mapping[str, object], table: Mapping[str, object], pyproject: Mapping[str, object]
) -> tuple[ModelPair, str]:
    if values["profile"]:
        name = str(values["profile"])
        pair = profile_pair(name, backend, pyproject)
        if values["model"] or values["draft"]:
            pair = ModelPair(
                str(values["model"] or pair.target), str(values["draft"]) if values["draft"] else pair.draft
            )
        return pair, name
    model = values["model"] or table.get("model")
    draft = values["draft"] or table.get("draft")
    embedded = profile_pairs("embedded").get(backend)
    if model is None:
        default = embedded
        if default is None:
            raise SpecdecUsageError(
                f"backend {backend!r} has no embedded default model — set --specdec-model (and --specdec-draft)"
            )
        pair = ModelPair(default.target, str(draft) if draft else default.draft)
    else:
        pair = ModelPair(str(model), str(draft) if draft else None)
    profile = "embedded" if models.is_embedded(pair.target) or pair == embedded else "user"
    return pair, profile


MAX_TOKENS_LIMIT = 131_072  # the longest window a local model takes (128 Ki tokens): no generation is longer
TRIALS_LIMIT = 100_000  # pairs of one comparison: 200 000 generations, days on any machine
DISTRIBUTION_SAMPLES_LIMIT = 4_096  # continuations per arm and prompt: 32 x the default, hours already


def validate(settings: Settings) -> None:
    """Range checks with one line each; every size has an upper bound, checked before anything runs."""
    for flag, value, limit in (("max-tokens", settings.max_tokens, MAX_TOKENS_LIMIT),
                               ("max-trials", settings.max_trials, TRIALS_LIMIT),
                               ("min-trials", settings.min_trials, TRIALS_LIMIT),
                               ("distribution-samples", settings.distribution_samples, DISTRIBUTION_SAMPLES_LIMIT)):  # fmt: skip
        if value > limit:
            raise SpecdecUsageError(f"--specdec-{flag} {value} is above {limit:,} — the largest this tool runs")
    if not 0.0 < settings.confidence < 1.0:
        raise SpecdecUsageError(f"--specdec-confidence {settings.confidence:g} is outside (0, 1) — use e.g. 0.95")
    if settings.max_trials < 2:
        raise SpecdecUsageError(f"--specdec-max-trials {settings.max_trials} is below 2 — an interval needs two pairs")
    if settings.min_trials < 2:
        raise SpecdecUsageError(f"--specdec-min-trials {settings.min_trials} is below 2 — an interval needs two pairs")
    if settings.max_trials < settings.min_trials:
        raise SpecdecUsageError(
            f"--specdec-max-trials {settings.max_trials} is below --specdec-min-trials {settings.min_trials} — raise it"
        )
    if settings.max_tokens < 2:
        raise SpecdecUsageError(
            f"--specdec-max-tokens {settings.max_tokens} is below 2 — decode timing needs two tokens"
        )
    if settings.num_draft < 1:
        raise SpecdecUsageError(f"--specdec-num-draft {settings.num_draft} is below 1 — draft at least one token")
    if settings.near_tie < 0.0:
        raise SpecdecUsageError(f"--specdec-near-tie {settings.near_tie:g} is negative — use 0 to demand exact output")
    if settings.distribution_samples < 2:
        raise SpecdecUsageError(
            f"--specdec-distribution-samples {settings.distribution_samples} is below 2 — the check compares "
            "continuations within each arm; use the default 128"
        )
    if not 0.0 <= settings.drift_min_effect < 1.0:
        raise SpecdecUsageError(
            f"--specdec-drift-min-effect {settings.drift_min_effect:g} is outside [0, 1) — use e.g. 0.05"
        )
    if not 0.0 <= settings.acceptance_drop < 1.0:  # NaN fails too
        raise SpecdecUsageError(
            f"--specdec-acceptance-drop {settings.acceptance_drop:g} is outside [0, 1) — use e.g. 0.10 (10 points)"
        )
    if not 0.0 < settings.drift_alpha < 1.0:
        raise SpecdecUsageError(
            f"--specdec-drift-alpha {settings.drift_alpha:g} is outside (0, 1) — use e.g. 0.01 (a false alarm in "
            "a hundred quiet nights)"
        )
    plot = settings.outputs.get("plot")
    if plot and not plot.lower().endswith(".png"):
        raise SpecdecUsageError(f"--specdec-plot {plot!r} must name a .png file")
    if settings.interval not in ("these-prompts", "prompts-like-these"):
        raise SpecdecUsageError(f"--specdec-interval {settings.interval!r} must be these-prompts or prompts-like-these")
    if not 0.0 < settings.precision < 1.0:
        raise SpecdecUsageError(f"--specdec-precision {settings.precision:g} is outside (0, 1)")


def requested_backend(args: Sequence[str]) -> str | None:
    """The ``--backend`` / ``--specdec-backend`` value on a command line, before pytest parses it."""
    for index, arg in enumerate(args):
        for flag in ("--backend", "--specdec-backend"):
            if arg == flag and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(flag + "="):
                return arg.partition("=")[2]
    return None
