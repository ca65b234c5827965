"""The run's loaded backends: each model pair and option set loaded once, closed at the end.

A comparison asks the pool for the backend its plan needs: the configured backend for
plain vs SD, or an :class:`~pytest_specdec.backends.arms.ArmRouter` over one backend
per arm when the arms differ in more than SD on/off. A backend's model identity (its
digest, weight size and whether it is a base model) is read **once, when it loads**:
files changed or removed during the run cannot re-key its results or break the
roofline, and no comparison re-reads a model file or asks a server again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_specdec.backends import backend_spec, load_backend
from pytest_specdec.backends.arms import ArmRouter, arm_backend_options, arm_pair, arm_runtime, needs_router
from pytest_specdec.backends.base import Arm, Backend, KnowsModelKind, KnowsWeightBytes, ModelPair, RendersChat
from pytest_specdec.embedded.prompts import ChatMessage

Loader = Callable[[str, ModelPair, Mapping[str, str]], Backend]
BackendKey = tuple[str, ModelPair, tuple[tuple[str, str], ...]]


@dataclass
class BackendPool:
    """Backends by (name, pair, options), loaded on first use."""

    default_name: str
    default_pair: ModelPair
    default_options: Mapping[str, str]
    loader: Loader = load_backend
    _backends: dict[BackendKey, Backend] = field(default_factory=dict)
    _digests: dict[tuple[str, ModelPair], str] = field(default_factory=dict)
    _weights: dict[tuple[str, ModelPair], int] = field(default_factory=dict)
    _base_models: dict[tuple[str, ModelPair], bool] = field(default_factory=dict)

    def backend(
        self, pair: ModelPair | None = None, name: str | None = None, extra_options: Mapping[str, str] | None = None
    ) -> Backend:
        """The backend for ``pair`` (default: the configured pair) and options, loaded once."""
        backend_name = name or self.default_name
        options = dict(self.default_options) if backend_name == self.default_name else {}
        options.update(extra_options or {})
        key = (backend_name, pair or self.default_pair, tuple(sorted(options.items())))
        if key not in self._backends:
            loaded = self.loader(key[0], key[1], options)
            self._backends[key] = loaded
            identity = (loaded.name, loaded.pair)
            self._digests.setdefault(identity, loaded.model_digest())
            if isinstance(loaded, KnowsWeightBytes):
                self._weights.setdefault(identity, loaded.weight_bytes())
            if isinstance(loaded, KnowsModelKind):
                self._base_models.setdefault(identity, loaded.is_base_model())
        return self._backends[key]

    def for_arms(
        self, baseline: Arm, treatment: Arm, pair: ModelPair | None, options: Mapping[str, str] | None = None
    ) -> Backend:
        """One backend for plain vs SD; a router over one backend per arm for other A/B pairs.

        ``options`` are what the comparison's conditions need the backend loaded with (a server's slots).
        """
        if not needs_router(baseline, treatment):
            return self.backend(pair, extra_options=options)
        base = pair or self.default_pair
        return ArmRouter(
            {
                arm.label: self.backend(
                    arm_pair(base, arm),
                    name=arm_runtime(arm),
                    extra_options={**(options or {}), **arm_backend_options(arm)},
                )
                for arm in (baseline, treatment)
            }
        )

    def digest(self, backend: Backend) -> str:
        """The model digest read when the backend loaded (each arm's, joined, for a router)."""
        if isinstance(backend, ArmRouter):
            return "|".join(self.digest(member) for member in backend.members)
        key = (backend.name, backend.pair)
        if key not in self._digests:
            self._digests[key] = backend.model_digest()
        return self._digests[key]

    def arm_options(self, backend: Backend) -> str:
        """The options it was loaded with that change what an arm runs (``OptionSpec.arm``), as ``ngram=3;spec=ngram``
        (a router: each arm's, joined by ``|``); "" where none was set."""
        if isinstance(backend, ArmRouter):
            return "|".join(self.arm_options(member) for member in backend.members)
        for (name, _, options), loaded in self._backends.items():
            if loaded is backend:
                changes_arm = {option.key for option in backend_spec(name).options if option.arm}
                return ";".join(f"{key}={value}" for key, value in options if key in changes_arm)
        return ""

    def is_base_model(self, backend: Backend) -> bool:
        """Whether the target is a base model (read when it loaded; a router asks its first arm)."""
        if isinstance(backend, ArmRouter):
            return self.is_base_model(backend.members[0])
        return self._base_models.get((backend.name, backend.pair), False)

    def chat_text(self, backend: Backend, messages: Sequence[ChatMessage]) -> str | None:
        """The engine's chat template applied to ``messages`` (``None``: it has none, or the arms run on two
        backends, whose templates need not agree)."""
        if isinstance(backend, RendersChat):
            return backend.chat_text(messages)
        return None

    def weight_bytes(self, backend: Backend) -> int | None:
        """The target's weight size read when the backend loaded (``None`` when it cannot tell)."""
        return self._weights.get((backend.name, backend.pair))

    def close(self) -> None:
        """Release every backend, each one even if another fails to close (the first failure is raised)."""
        backends = list(self._backends.values())
        self._backends.clear()
        failure: Exception | None = None
        for backend in backends:
            try:
                backend.close()
            except Exception as error:
                failure = failure or error
        if failure is not None:
            raise failure
