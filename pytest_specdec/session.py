"""One run's bookkeeping: loaded backends, comparisons made, and their outcomes.

The pytest glue creates one :class:`SpecdecSession`, asks it to :meth:`compare`,
and turns each :class:`Outcome` into pass, fail or warning. Nothing here imports
pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from pytest_specdec.backends import load_backend
from pytest_specdec.backends.base import Arm, Backend, ModelPair
from pytest_specdec.claims import Expectations, Outcome, judge_outcome, stop_rule
from pytest_specdec.config import Settings
from pytest_specdec.measure import ComparisonPlan, Progress, run_comparison
from pytest_specdec.prompts import prompts_for


@dataclass
class SpecdecSession:
    """Backends loaded once per pair, and every outcome of the run."""

    settings: Settings
    machine_class: str
    loader: Callable[[str, ModelPair, Mapping[str, str]], Backend] = load_backend
    outcomes: list[Outcome] = field(default_factory=list)
    _backends: dict[tuple[str, ModelPair], Backend] = field(default_factory=dict)

    def backend(self, pair: ModelPair | None = None, name: str | None = None) -> Backend:
        """The backend for ``pair`` (default: the configured pair), loaded once."""
        key = (name or self.settings.backend, pair or self.settings.pair)
        if key not in self._backends:
            options = self.settings.backend_options if key[0] == self.settings.backend else {}
            self._backends[key] = self.loader(key[0], key[1], options)
        return self._backends[key]

    def plan(
        self,
        category: str,
        expect: Expectations,
        *,
        num_draft: int | None = None,
        max_tokens: int | None = None,
        baseline: Arm | None = None,
        treatment: Arm | None = None,
    ) -> ComparisonPlan:
        """A plain-vs-SD plan from the settings, unless other arms are given."""
        settings = self.settings
        gamma = num_draft or settings.num_draft
        return ComparisonPlan(
            category=category,
            prompts=prompts_for(category),
            baseline=baseline or Arm("plain"),
            treatment=treatment or Arm("sd", speculative=True, num_draft=gamma),
            max_tokens=max_tokens or settings.max_tokens,
            min_trials=settings.min_trials,
            max_trials=settings.max_trials,
            confidence=settings.confidence,
            stop_when=stop_rule(expect) if expect.has_bounds else None,
            precision=settings.precision,
        )

    def compare(
        self,
        nodeid: str,
        plan: ComparisonPlan,
        expect: Expectations,
        pair: ModelPair | None = None,
        progress: Callable[[Progress], None] = lambda _: None,
    ) -> Outcome:
        """Run one comparison on the pair's backend and judge it."""
        backend = self.backend(pair)
        comparison = run_comparison(backend, plan, progress)
        settings = replace(self.settings, pair=backend.pair)
        outcome = judge_outcome(nodeid, settings, backend.fingerprint(), comparison, expect)
        self.outcomes.append(outcome)
        return outcome

    def close(self) -> None:
        """Release every backend."""
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()
