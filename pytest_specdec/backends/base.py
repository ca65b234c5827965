"""The one interface every backend implements, and the data it exchanges.

A backend only *translates*: it turns a :class:`GenerationRequest` into calls of its
library or server and yields the tokens as they arrive. Timing, pairing, the
lossless and engaged checks and the statistics all live in ``measure/``.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, NamedTuple, Protocol, runtime_checkable

from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.backends.sampling import GREEDY, Sampling
from pytest_specdec.embedded.prompts import ChatMessage
from pytest_specdec.errors import SpecdecUsageError

OptionValue = str | int | float | bool


@dataclass(frozen=True)
class Arm:
    """One side of an A/B comparison.

    ``speculative`` arms draft ``num_draft`` tokens per step; ``options`` carries
    backend-specific switches (e.g. ``flash_attn``) that the adapter translates.
    """

    label: str
    speculative: bool = False
    num_draft: int = 0
    options: Mapping[str, OptionValue] = field(default_factory=dict)


@dataclass(frozen=True)
class GenerationRequest:
    """One generation of a fixed token budget; sampled ones draw with ``seed``.

    ``every_token``: an in-process backend yields each token as its own burst as it is decoded (a
    stand-in server streams them on); ``False``, as a measurement asks, the first token alone and
    the rest in one burst the moment the last is decoded, so nothing runs per token in the decode
    window but the library's own loop (issue #52: each layer of per-token Python cost up to 2-3 µs a token
    on quiet cores, ``scripts/cuda/path_profile.py``). Servers stream what they stream.
    """

    prompt: str
    arm: Arm
    max_tokens: int
    seed: int = 0
    sampling: Sampling = GREEDY
    every_token: bool = True


class TokenBurst(NamedTuple):
    """Tokens that arrived together; ``from_draft`` flags accepted draft tokens.

    A named tuple: where a request asks for every token, one is made per token inside the
    decode window (a frozen dataclass cost about 1.6x as much to build).
    """

    token_ids: tuple[int, ...]
    from_draft: tuple[bool, ...] | None = None


@dataclass(frozen=True)
class GenerationStats:
    """What a backend knows once its stream has ended.

    Counts a backend cannot know are ``None``. ``server_decode_seconds`` and
    ``server_ttft_seconds`` are set by servers that time themselves; the protocol
    then prefers them over the client's wall clock.
    """

    prompt_tokens: int
    drafted: int | None = None
    accepted: int | None = None
    peak_memory_bytes: int | None = None
    server_decode_seconds: float | None = None
    server_decode_tokens: int | None = None
    server_ttft_seconds: float | None = None
    # Tokens generated, for backends whose bursts carry text units instead of token ids.
    generated_tokens: int | None = None
    # Seconds the server spent loading or reloading the model before this generation
    # (excluded from decode and first-token timing, reported on its own).
    load_seconds: float | None = None
    # What the bursts' ids are: "token" ids, or "character" code points of the text.
    output_units: str = "token"


class NotRun(StrEnum):
    """Why SD did not run, in the class the engine's own answer puts it (its words stay in the reason beside it).

    Only an engine that says so sets one; where it says nothing, the plugin's observed engagement (drafted
    counts, the probe) is the word, and no class is given.
    """

    DRAFTER_NOT_LOADED = "drafter not loaded"  # asked to speculate, the engine set no drafter up
    NOTHING_TO_DRAFT = "nothing to draft"  # speculating, yet its lookup found no draft in these prompts
    DEPTH_ZERO = "drafting depth 0"  # a drafter loaded with no draft length
    PAUSED_FOR_TOOLS = "paused for tools"  # the request's tools send it down the ordinary path
    NON_GREEDY = "non-greedy request"  # the engine drafts for greedy requests only
    NO_MTP_TENSORS = "no MTP tensors"  # the checkpoint carries no MTP head for the engine to load
    REASONING_ONLY = "reasoning tokens only"  # the budget went to hidden reasoning
    REFUSED = "batch or concurrency refused"  # the engine does not speculate on batched or concurrent requests


@dataclass(frozen=True)
class SpeculationEvidence:
    """What a server's own answers say about each arm, before anything is measured.

    ``True``: the arm is known to speculate; ``False``: known not to; ``None``: the
    server does not say (the engagement probe must tell). ``why``: the class of the engine's own reason why
    the SD arm does not speculate, where it gives one (:class:`NotRun`).
    """

    sd_arm: bool | None
    plain_arm: bool | None
    reason: str
    why: NotRun | None = None


@dataclass(frozen=True)
class Fingerprint:
    """Which software and device produced a measurement."""

    backend: str
    release: str
    versions: Mapping[str, str] = field(default_factory=dict)
    device: str = "unknown"
    details: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelPair:
    """A target model and the draft that speculates for it (``None``: no draft)."""

    target: str
    draft: str | None = None


GenerationStream = Generator[TokenBurst, None, GenerationStats]


@runtime_checkable
class Backend(Protocol):
    """A loaded model pair on one runtime.

    Implementations are constructed by the registry with the model pair and
    string options; loading happens in the constructor so a bad model is a usage
    error before any trial runs.
    """

    name: ClassVar[str]

    @property
    def pair(self) -> ModelPair:
        """The models this backend instance serves."""
        ...

    def fingerprint(self) -> Fingerprint:
        """Library versions, device and model identities."""
        ...

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Yield the tokens of one greedy generation, then return its stats."""
        ...

    def model_digest(self) -> str:
        """A digest of the model files (or the server's digest) of the pair."""
        ...

    def close(self) -> None:
        """Release models, servers and memory."""
        ...


@runtime_checkable
class MeasuresStepCosts(Protocol):
    """A backend that can time target and draft forward passes directly (for c and r_v)."""

    def step_costs(self, prompt: str, num_draft: int) -> tuple[float, float, float, str]:
        """``(draft step s, target 1-token step s, target (γ+1)-token step s, method)``."""
        ...


@runtime_checkable
class KnowsSpeculation(Protocol):
    """A backend that can say from the server's answers whether each arm can speculate."""

    def speculation_evidence(self) -> SpeculationEvidence:
        """The static evidence, recorded in the fingerprint and used to judge engagement."""
        ...


@runtime_checkable
class CompilesPerShape(Protocol):
    """A backend whose runtime compiles kernels for each new shape (mlx on a GPU): slow the first time."""

    def compiles_per_shape(self) -> bool:
        """True where each prompt's first full-length generation is slow until its kernels exist."""
        ...


@runtime_checkable
class AdaptsDraftLength(Protocol):
    """A backend whose engine picks the draft length itself, each round: γ is not a knob there."""

    def adapts_draft_length(self) -> bool:
        """True where no γ is sent and none applies (the record says "upstream", never a γ)."""
        ...


@runtime_checkable
class KnowsDefaultDraftLength(Protocol):
    """A backend whose library or server drafts a length of its own when a user sets none (llama-cpp-python's
    prompt lookup: ``num_pred_tokens=10``): that is the default arm, and a γ set by the user a tuned one."""

    def default_num_draft(self) -> int | None:
        """The length its users get by default, read from the library or server (``None``: the plugin's γ)."""
        ...


@runtime_checkable
class KnowsModelKind(Protocol):
    """A backend that can tell a base model (no chat template: it continues text) from a chat model."""

    def is_base_model(self) -> bool:
        """Whether the target is a base model, so prompts must be text to continue."""
        ...


@runtime_checkable
class RendersChat(Protocol):
    """A backend whose engine turns chat messages into the prompt text by the model's own chat template.

    Example (mlx: the tokenizer's template; llama-server: its ``POST /apply-template``)::

        text = backend.chat_text([ChatMessage("user", "Summarise this ticket.")])
        # '<start_of_turn>user\nSummarise this ticket.<end_of_turn>\n<start_of_turn>model\n' (Gemma's template)

    A text it returned is then generated as it is, never wrapped in the template a second time.
    """

    def chat_text(self, messages: Sequence[ChatMessage]) -> str | None:
        """The text the engine's template makes of ``messages``, the assistant's turn opened; ``None``: no template."""
        ...


@runtime_checkable
class Detokenizes(Protocol):
    """A backend that can turn its token ids back into text (for samples in the report)."""

    def detokenize(self, tokens: list[int]) -> str:
        """The text of ``tokens``."""
        ...


@runtime_checkable
class KnowsWeightBytes(Protocol):
    """A backend that knows how many bytes of weights its target reads per token."""

    def weight_bytes(self) -> int:
        """Size of the target's weight files."""
        ...


@dataclass(frozen=True)
class OptionSpec:
    """One ``--specdec-backend-option KEY=VALUE`` a backend reads: its type and help.

    ``flag`` also gives it a command-line option of its own, ``--specdec-<flag>`` (with
    an ini twin), for options users set on every run (``ollama_host``). ``arm``: the option
    changes what an arm runs (a spec type, threads, a context size), so each result records
    its value and a baseline measured under another value is never read as "unchanged";
    where it only reaches the engine (a URL, a timeout) it is not.
    """

    key: str
    kind: str  # "str", "int", "float" or "bool"
    help: str
    flag: str | None = None
    arm: bool = False


@dataclass(frozen=True)
class ServeRecipe:
    """How the gate starts a backend's server, when it is ready, and which option gets its URL.

    ``{port}`` and ``{model}`` in the command and environment are filled in at start.
    """

    command: tuple[str, ...]
    environment: Mapping[str, str] = field(default_factory=dict)
    ready: str = "/"
    url_option: str = "url"


@dataclass(frozen=True)
class OldRelease:
    """Where last night's release of a backend still runs, beside tonight's (the gate's same-night A/B).

    ``python``: the interpreter of the environment rebuilt from the hashed lock (an
    in-process runtime, or a server the package ships); ``options``: backend options
    that point its worker at the old release (``binary=`` of the previous llama-server);
    ``program``: the old server program that replaces the serve recipe's first word (the
    previous Homebrew keg's ``ollama``, the old environment's ``mtplx``). ``release`` is
    what that old release says it is, read from it.
    """

    release: str
    python: str | None = None  # None: tonight's interpreter
    options: Mapping[str, str] = field(default_factory=dict)
    program: str | None = None


@dataclass(frozen=True)
class BackendSpec:
    """Everything the plugin, the CLI, the gate and the reports know of a backend, without importing it.

    Each backend folder (``backends/<name>/__init__.py``) exports one as ``SPEC``; a
    third-party package registers one under the ``pytest_specdec.backends`` entry-point
    group. Callables are named as ``"module:attribute"`` strings and imported only when
    used, so reading a spec never loads a runtime.
    """

    name: str
    target: str  # "module:Class" of the adapter
    summary: str = ""  # one line for --help and `pytest-specdec backends`
    requires: tuple[str, ...] = ()  # top-level modules its runtime needs
    extra: str | None = None  # the pytest-specdec extra that installs them
    distributions: tuple[str, ...] = ()  # distributions whose versions it reports
    # Oldest releases the adapter can run on (what it calls exists from then on).
    minimum: Mapping[str, str] = field(default_factory=dict)
    options: tuple[OptionSpec, ...] = ()  # every --specdec-backend-option key it reads
    # The model pair each profile gives it ("embedded": the synthetic default, "gemma", "seed", ...).
    pairs: Mapping[str, ModelPair] = field(default_factory=dict)
    # The kinds of SD it can run; claims select by kind (a draft model runs claim d), see backends/kinds.py.
    kinds: tuple[SpeculationKind, ...] = ()
    evidence_family: str | None = None  # the runtime family published rows are filed under ("llama.cpp")
    # "module:function" returning {label: release} for the servers it talks to, as each reports itself.
    server_releases: str | None = None
    serve: ServeRecipe | None = None  # how the gate starts its server (None: the gate cannot)
    upgrade_packages: tuple[str, ...] | None = None  # what the gate's upgrade moves (default: distributions)
    standin: str | None = None  # "module:Class" of its stand-in server's request handler
    native_first: str | None = None  # a module to import before numpy (CUDA images: see README)
    # "module:function" listing the models present on this machine for it (Ollama's pulled tags).
    local_models: str | None = None
    # Its release is the Python package: two virtual environments hold two releases side by
    # side (the gate's same-night old-versus-new comparison runs one worker process on each).
    in_process: bool = False
    # "module:function" (old_venv: Path | None, before: {label: release}) -> OldRelease | None:
    # where a server's previous release still runs tonight (a kept Homebrew keg, the old venv).
    previous_release: str | None = None
    # "module:function" returning more ``pytest-specdec doctor`` lines (``!`` first where action is needed).
    doctor: str | None = None

    @property
    def option_keys(self) -> frozenset[str]:
        """The keys of :attr:`options`."""
        return frozenset(option.key for option in self.options)

    @property
    def fixture_name(self) -> str:
        """``llama_cpp_backend``: the session fixture that loads it."""
        return self.name.replace("-", "_") + "_backend"


def load_attribute(reference: str) -> object:
    """The object a ``"module:attribute"`` string names (imported now)."""
    import importlib

    module_name, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


class BackendOptions:
    """Typed reads of the ``--specdec-backend-option KEY=VALUE`` strings.

    Every key a backend reads is recorded, so unknown keys can be reported as a
    usage error instead of being silently ignored.
    """

    def __init__(self, backend: str, raw: Mapping[str, str]) -> None:
        self._backend = backend
        self._raw = dict(raw)
        self._known: set[str] = set()

    def text(self, key: str, default: str) -> str:
        """A string option."""
        self._known.add(key)
        return self._raw.get(key, default)

    def number(self, key: str, default: float, *, low: float | None = None, high: float | None = None) -> float:
        """A float option, checked against an inclusive range."""
        self._known.add(key)
        if key not in self._raw:
            return default
        try:
            value = float(self._raw[key])
        except ValueError:
            raise self._error(key, "a number") from None
        if not math.isfinite(value):  # nan compares false with every bound: refused by name, never measured
            raise self._error(key, "a finite number")
        if (low is not None and value < low) or (high is not None and value > high):
            raise self._error(key, f"a number in [{low}, {high}]")
        return value

    def integer(self, key: str, default: int, *, low: int | None = None, high: int | None = None) -> int:
        """An integer option, checked against an inclusive range."""
        self._known.add(key)
        if key not in self._raw:
            return default
        try:
            value = int(self._raw[key])
        except ValueError:
            raise self._error(key, "a whole number") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise self._error(key, f"a whole number in [{low}, {high}]")
        return value

    def choice(self, key: str, default: str, allowed: Sequence[str]) -> str:
        """A string option from a fixed set."""
        value = self.text(key, default)
        if value not in allowed:
            raise self._error(key, "one of " + ", ".join(allowed))
        return value

    def flag(self, key: str, default: bool) -> bool:
        """A boolean option: true/false, yes/no, 1/0, on/off."""
        self._known.add(key)
        if key not in self._raw:
            return default
        value = self._raw[key].strip().lower()
        if value in {"1", "true", "yes", "on"}:
            return True
        if value in {"0", "false", "no", "off"}:
            return False
        raise self._error(key, "true or false")

    def reject_unknown(self) -> None:
        """Fail on keys the backend never read (typos must not pass silently)."""
        unknown = sorted(set(self._raw) - self._known)
        if unknown:
            known = ", ".join(sorted(self._known)) or "none"
            raise SpecdecUsageError(
                f"backend {self._backend!r} has no option {unknown[0]!r} (its options: {known}) — fix --specdec-backend-option"
            )

    def _error(self, key: str, expected: str) -> SpecdecUsageError:
        return SpecdecUsageError(
            f"backend option {key}={self._raw[key]!r} for {self._backend!r} must be {expected} — fix --specdec-backend-option {key}=..."
        )
