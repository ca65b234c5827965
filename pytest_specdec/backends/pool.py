"""The run's loaded backends: each model pair and option set loaded once, closed at the end.

A comparison asks the pool for the backend its plan needs: the configured backend for
plain vs SD, or an :class:`~pytest_specdec.backends.arms.ArmRouter` over one backend
per arm when the arms differ in more than SD on/off. Model digests are read once per
backend and pair.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pytest_specdec.backends import load_backend
from pytest_specdec.backends.arms import ArmRouter, arm_backend_options, arm_pair, needs_router
from pytest_specdec.backends.base import Arm, Backend, ModelPair

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

    def backend(
        self, pair: ModelPair | None = None, name: str | None = None, extra_options: Mapping[str, str] | None = None
    ) -> Backend:
        """The backend for ``pair`` (default: the configured pair) and options, loaded once."""
        backend_name = name or self.default_name
        options = dict(self.default_options) if backend_name == self.default_name else {}
        options.update(extra_options or {})
        key = (backend_name, pair or self.default_pair, tuple(sorted(options.items())))
        if key not in self._backends:
            self._backends[key] = self.loader(key[0], key[1], options)
        return self._backends[key]

    def for_arms(self, baseline: Arm, treatment: Arm, pair: ModelPair | None) -> Backend:
        """One backend for plain vs SD; a router over one backend per arm for other A/B pairs."""
        if not needs_router(baseline, treatment):
            return self.backend(pair)
        base = pair or self.default_pair
        return ArmRouter(
            {
                arm.label: self.backend(arm_pair(base, arm), extra_options=arm_backend_options(arm))
                for arm in (baseline, treatment)
            }
        )

    def digest(self, backend: Backend) -> str:
        """The backend's model digest, read once per backend and pair."""
        key = (backend.name, backend.pair)
        if key not in self._digests:
            self._digests[key] = backend.model_digest()
        return self._digests[key]

    def close(self) -> None:
        """Release every backend."""
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()
