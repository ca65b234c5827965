"""The ``specdec`` fixture's object: what a test calls to measure and judge.

pytest glue like ``plugin.py``: it turns :class:`~pytest_specdec.session.SpecdecSession`
results into pass, fail, skip or warning.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_specdec.backends.base import Arm, Backend
from pytest_specdec.backends.sampling import Sampling
from pytest_specdec.claims import Expectations, QuantityVerdict, SpeedupBounds, judge_quantity
from pytest_specdec.errors import NO_RESULT_KEPT, BackendRuntimeError, NotMeasurableHere, SpecdecUsageError
from pytest_specdec.hardware import MachineProfile, environment_fitness, machine_profile
from pytest_specdec.measure import Progress
from pytest_specdec.render import report
from pytest_specdec.render.context_sweep import context_plot, context_point, context_sweep_line
from pytest_specdec.session import (
    ComparisonSpec,
    Result,
    SpecdecSession,
    plain_runtimes_line,
    sweep_summary,
    temperature_sweep_summary,
)
from pytest_specdec.stats import Interval

expectations_key = pytest.StashKey[Expectations]()


class SpecdecInconclusiveWarning(UserWarning):
    """A comparison ran out of trials before its interval cleared the bounds."""


class SpecdecFixture:
    """What the ``specdec`` fixture gives a test: ``compare(...)`` runs the protocol."""

    def __init__(self, request: pytest.FixtureRequest, session: SpecdecSession) -> None:
        self._request = request
        self._session = session
        self.result: Result | None = None

    @property
    def profile(self) -> str:
        """The model profile in use (``embedded`` for the synthetic pairs)."""
        return self._session.settings.profile

    @property
    def backend_name(self) -> str:
        """The ``--backend`` choice (the backend is not loaded by asking)."""
        return self._session.settings.backend

    @property
    def backend(self) -> Backend:
        """The configured backend (loaded once per session)."""
        return self._session.backend()

    def compare(
        self,
        category: str = "code",
        *,
        target: str | None = None,
        draft: str | None = None,
        num_draft: int | None = None,
        max_tokens: int | None = None,
        baseline: Arm | None = None,
        treatment: Arm | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        context: int = 0,
    ) -> Result:
        """Paired plain-vs-SD run on ``category``'s prompts, judged against the markers and the baseline.

        ``baseline`` / ``treatment`` pair any two arms instead, e.g. flash attention off
        vs on (``Arm("fa-on", options={"flash_attn": True})``) or two models
        (``Arm("7b", options={"model": "qwen2.5:7b"})``). ``temperature`` / ``top_p`` sample both
        arms (over a ``sampling`` marker); SD is then checked lossless by its seeds or its distribution.
        ``context`` puts that many tokens of text before every prompt; a length beyond the model's
        window or this machine's memory skips the test with the numbers.
        """
        sampling = None
        if temperature is not None or top_p is not None:  # over the test's sampling marker, where it has one
            marked = self._request.node.stash.get(expectations_key, Expectations()).sampling
            try:
                heat = marked.temperature if temperature is None else temperature
                cut = (marked.top_p if heat else 1.0) if top_p is None else top_p  # greedy over a marker: no cut
                sampling = Sampling(heat, cut)
            except SpecdecUsageError as error:
                raise pytest.UsageError(f"compare(): {error}") from None
        spec = ComparisonSpec(
            category, target, draft, num_draft, max_tokens, baseline, treatment, sampling=sampling, context=context
        )
        other_plain = self._session.plain_runtime_arm(spec) if baseline is None and treatment is None else None
        if other_plain is not None:
            # The user's question is SD against the fastest plain way: the verdict is against the other
            # runtime's plain decoding; the backend's own plain mode is measured too, for reference. Only
            # the reference comparison can check that SD is lossless (same runtime): its failure counts.
            own = self._measure(replace(spec, reference=True))
            result = self._measure(replace(spec, baseline=other_plain))
            self.note(plain_runtimes_line(category, own, result))
            _enforce(own.failure, None)  # a reference row fails only where SD is lossy or not engaged
        else:
            result = self._measure(spec)
        _enforce(result.failure, result.warning)
        return result

    def sweep(
        self,
        num_draft: Sequence[int],
        category: str = "code",
        *,
        max_tokens: int | None = None,
        max_trials: int | None = None,
    ) -> list[Result]:
        """``compare`` at each γ; reports the best γ and each γ's break-even α, then fails if any γ failed."""
        results = [
            self._measure(ComparisonSpec(category, num_draft=gamma, max_tokens=max_tokens, max_trials=max_trials))
            for gamma in num_draft
        ]
        self._session.notes.append(sweep_summary(stored_nodeid(self._request.node), category, results))
        _enforce_each(results, lambda r: f"γ={r.record.num_draft}")
        return results

    def temperature_sweep(
        self,
        temperatures: Sequence[float],
        category: str = "code",
        *,
        top_p: float | None = None,
        max_tokens: int | None = None,
        max_trials: int | None = None,
    ) -> list[Result]:
        """``compare`` at each temperature (0: greedy): the speedup and acceptance by temperature, then fails if any failed.

        ``top_p`` (else the test's ``sampling`` marker's) applies to every temperature above 0."""
        cut = self._request.node.stash.get(expectations_key, Expectations()).sampling.top_p if top_p is None else top_p
        try:
            samplings = [Sampling(t, cut if t else 1.0) for t in temperatures]
        except SpecdecUsageError as error:
            raise pytest.UsageError(f"temperature_sweep(): {error}") from None
        results = [
            self._measure(ComparisonSpec(category, max_tokens=max_tokens, max_trials=max_trials, sampling=sampling))
            for sampling in samplings
        ]
        self._session.notes.append(temperature_sweep_summary(stored_nodeid(self._request.node), category, results))
        _enforce_each(results, lambda r: r.record.scope.get("sampling", "greedy"))
        return results

    def context_sweep(
        self,
        lengths: Sequence[int],
        category: str = "code",
        *,
        max_tokens: int | None = None,
        max_trials: int | None = None,
        plot: str | Path | None = None,
    ) -> list[Result]:
        """``compare`` behind each length of context: decode and end-to-end speedup and acceptance per length,
        where the answer changes, and a plot (``plot``, else beside ``--specdec-plot``); then fails if any failed.

        A length beyond the model's window or this machine's memory is not measured, and the summary says why.
        """
        results, skipped = [], []
        for length in lengths:
            try:
                spec = ComparisonSpec(category, max_tokens=max_tokens, max_trials=max_trials, context=length)
                results.append(self._measure(spec, skip_unmeasurable=False))
            except NotMeasurableHere as error:
                skipped.append(str(error))
        nodeid = stored_nodeid(self._request.node)
        points = [context_point(r.record, r.outcome.comparison) for r in results]
        self._session.notes.append(context_sweep_line(nodeid, category, points, skipped))
        wanted = plot or self._session.settings.outputs.get("plot")
        if wanted and points:
            path = Path(wanted) if plot else Path(wanted).with_name(f"{Path(wanted).stem}-context-{_slug(nodeid)}.png")
            try:
                context_plot(points, path, f"{nodeid}: speedup by context [{category}]", skipped)
                self.note(f"context sweep plot: {path}")
            except ImportError as error:
                self.note(f"cannot draw {path}: {error.name} is not installed — pip install 'pytest-specdec[plot]'")
            except (OSError, SpecdecUsageError) as error:
                self.note(f"cannot write {path}: {error} — choose a writable .png path")
        if not results:
            pytest.skip(f"no length of {list(lengths)} is measurable here: {'; '.join(skipped)}")
        _enforce_each(results, lambda r: context_point(r.record, r.outcome.comparison).label)
        return results

    @property
    def machine(self) -> MachineProfile:
        """This machine's chip, memory, bandwidth and usable working set."""
        return machine_profile()

    @property
    def gating(self) -> bool:
        """Whether this test's claim gates under the current profile (else its verdicts are reference)."""
        expect = self._request.node.stash.get(expectations_key, Expectations())
        return expect.claim.gates(self.profile) if expect.claim else True

    def note(self, text: str) -> None:
        """A line for the run's summary, prefixed with this test's id."""
        self._session.notes.append(f"{stored_nodeid(self._request.node)}: {text}")

    def verify_cost(self, num_draft: int = 3, rounds: int = 8) -> Interval:
        """r_v for γ = ``num_draft`` on the configured backend, with a simultaneous interval."""
        try:
            return self._session.verify_cost(num_draft, rounds)
        except (SpecdecUsageError, BackendRuntimeError) as error:
            pytest.skip(f"could not run here: {error}")

    def judge(
        self, label: str, interval: Interval, *, min: float | None = None, max: float | None = None
    ) -> QuantityVerdict:
        """Judge a measured quantity against the claim's bounds: fail, warn or note, like ``compare``."""
        verdict = judge_quantity(
            label, interval, SpeedupBounds(min, max), gating=self.gating, strict=self._session.settings.strict
        )
        self.note(verdict.line)
        _enforce(verdict.failure, verdict.warning)
        return verdict

    def _measure(self, spec: ComparisonSpec, *, skip_unmeasurable: bool = True) -> Result:
        fitness = environment_fitness()
        if not fitness.fit:
            pytest.skip(f"environment not fit to measure: {fitness.reason}")
        item = self._request.node
        expect = item.stash.get(expectations_key, Expectations())
        live = LiveLine(self._request.config)
        try:
            result = self._session.compare(stored_nodeid(item), spec, expect, live)
        except NotMeasurableHere as error:
            if not skip_unmeasurable:
                raise
            pytest.skip(str(error))
        except (SpecdecUsageError, BackendRuntimeError) as error:
            pytest.fail(f"{error} — {NO_RESULT_KEPT}", pytrace=False)
        except Exception as error:  # a backend library failing mid-run: one line, nothing kept
            name = self._session.settings.backend
            pytest.fail(
                f"backend {name!r} failed while measuring: {type(error).__name__}: {error} — {NO_RESULT_KEPT}",
                pytrace=False,
            )
        finally:
            live.finish()
        self.result = result
        _record_properties(self._request, result)
        return result


BENCHMARKS = Path(__file__).resolve().parent / "benchmarks"


def _slug(nodeid: str) -> str:
    """A test id as a file name part: ``test_context_sweep-llama-cpp``."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "-", nodeid.rsplit("::", 1)[-1]).strip("-")


def stored_nodeid(item: pytest.Item) -> str:
    """The node id results are stored under: the shipped claims are ``benchmarks/…`` however they were run.

    ``pytest benchmarks/`` in the repository, ``pytest --pyargs pytest_specdec.benchmarks``
    from a plain install and the same from the repository give three node ids for one
    test; baselines and history must not tell them apart.
    """
    try:
        inside = Path(item.path).resolve().relative_to(BENCHMARKS)
    except ValueError:
        return item.nodeid
    _, _, rest = item.nodeid.partition("::")
    return f"benchmarks/{inside.as_posix()}::{rest}"


class LiveLine:
    """Live progress while a comparison runs, past pytest's output capture (as live logging does).

    In a terminal: one line under the test's row, rewritten after every pair, then erased
    with the cursor put back where pytest left it, so the test's ``.`` and ``[100%]`` land
    on their own row as usual (pytest's writer never sees the live line: its column count
    stays true). Elsewhere (CI logs): the first pair, every fifth and the last, as lines.
    """

    def __init__(self, config: pytest.Config) -> None:
        self._reporter = config.pluginmanager.get_plugin("terminalreporter")
        self._capture = config.pluginmanager.get_plugin("capturemanager")
        self._started = time.monotonic()
        self._stage = ("pair", self._started)  # the stage shown and when it began (its time left is its own)
        self._last = self._started  # when the last update came
        self._below = False  # a live line is on the row under pytest's

    def _uncaptured(self) -> Any:
        return self._capture.global_and_fixture_disabled() if self._capture is not None else contextlib.nullcontext()

    def __call__(self, update: Progress) -> None:
        """Show one update."""
        if self._reporter is None:
            return
        now = time.monotonic()
        if update.stage != self._stage[0]:  # a new stage began when the last one's final update was shown
            self._stage = (update.stage, self._last)
        self._last = now
        line = "    " + report.progress_line(
            update, now - (self._started if update.stage == "pair" else self._stage[1])
        )
        with self._uncaptured():
            if self._reporter.isatty():
                width = self._reporter._tw.fullwidth  # the terminal's width, as pytest measured it
                if len(line) >= width:  # a narrow terminal: the times go first, never a word cut in two
                    line = "    " + report.progress_line(update)
                sys.stdout.write(("" if self._below else "\n") + "\r" + line[: max(1, width - 1)] + "\x1b[K")
                sys.stdout.flush()
                self._below = True
            elif update.done in (1, update.planned_max) or update.done % max(5, update.planned_max // 20) == 0:
                self._reporter.ensure_newline()
                self._reporter.write_line(line)

    def finish(self) -> None:
        """Erase the live line and put the cursor back at the end of pytest's row."""
        if not self._below or self._reporter is None:
            return
        column = self._reporter._tw.width_of_current_line
        with self._uncaptured():
            sys.stdout.write("\r\x1b[K\x1b[1A\r" + (f"\x1b[{column}C" if column else ""))
            sys.stdout.flush()
        self._below = False


def _record_properties(request: pytest.FixtureRequest, result: Result) -> None:
    record = result.record
    s = record.speedup
    request.node.user_properties.extend(
        [
            ("specdec_speedup", f"{s.estimate:.4f}"),
            ("specdec_interval", f"[{s.low:.4f}, {s.high:.4f}]"),
            ("specdec_verdict", record.judgement.shown),
            ("specdec_baseline", record.check.change.value if record.check else "none"),
        ]
    )


def _enforce_each(results: Sequence[Result], label: Callable[[Result], str]) -> None:
    """A sweep's failures and warnings, each named by its setting (``γ=3: …``), after every setting ran."""
    failures = "; ".join(f"{label(r)}: {r.failure}" for r in results if r.failure)
    warned = "; ".join(f"{label(r)}: {r.warning}" for r in results if r.warning)
    _enforce(failures or None, warned or None)


def _enforce(failure: str | None, warning: str | None) -> None:
    """A failure fails the test in one line; a warning (inconclusive, drift) is a warning."""
    if failure:
        pytest.fail(failure, pytrace=False)
    if warning:
        warnings.warn(SpecdecInconclusiveWarning(warning), stacklevel=3)
