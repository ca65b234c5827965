"""The ``specdec`` fixture's object: what a test calls to measure and judge.

pytest glue like ``plugin.py``: it turns :class:`~pytest_specdec.session.SpecdecSession`
results into pass, fail, skip or warning.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import pytest

from pytest_specdec.axes import Conditions, from_keywords, sweep_axis
from pytest_specdec.backends import backend_spec
from pytest_specdec.backends.base import Arm, Backend, BackendSpec
from pytest_specdec.backends.kinds import SpeculationKind, run_kind
from pytest_specdec.claims import Expectations, QuantityVerdict, SpeedupBounds, judge_quantity
from pytest_specdec.embedded.prompt_sets import PromptSet
from pytest_specdec.errors import (
    NO_RESULT_KEPT,
    BackendRuntimeError,
    ModelLoadError,
    NotMeasurableHere,
    PlainArmSpeculates,
    SpecdecUsageError,
)
from pytest_specdec.hardware import MachineProfile, environment_fitness, machine_profile
from pytest_specdec.measure import Progress
from pytest_specdec.render import report
from pytest_specdec.render.sweep import sweep_line, sweep_plot, sweep_point
from pytest_specdec.session import ComparisonSpec, Result, SpecdecSession, plain_runtimes_line
from pytest_specdec.stats import Interval
from pytest_specdec.store.records import Unmeasured, UnmeasuredTest

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

    @property
    def backend_spec(self) -> BackendSpec:
        """What the ``--backend`` choice declares (read without loading it)."""
        return backend_spec(self.backend_name)

    @property
    def speculation_kind(self) -> SpeculationKind | None:
        """The kind of SD this run's speculative arm runs (``backends/kinds.py``; loads the backend)."""
        backend = self.backend
        return run_kind(self.backend_spec.kinds, backend, backend.pair.draft)

    def compare(
        self,
        category: str | None = None,
        *,
        prompts: Sequence[str] | str | None = None,
        target: str | None = None,
        draft: str | None = None,
        max_tokens: int | None = None,
        baseline: Arm | None = None,
        treatment: Arm | None = None,
        max_trials: int | None = None,
        **conditions: object,
    ) -> Result:
        """Paired plain-vs-SD run on ``category``'s prompts, judged against the markers and the baseline.

        ``category`` is a built-in content class (``code`` by default, ``copy``, ``prose``, ``unpredictable``,
        ``creative``, ``tool-call``, ``chat``, ``all``) or a set of your prompt file (``[tool.specdec] prompts``).
        ``prompts`` measures your own prompts instead (a list of texts, or of conversations: lists of
        ``{"role": ..., "content": ...}``), or names a set of the prompt file; ``category`` then says what
        content they are (``custom`` by default). The set's digest is part of the key.

        ``max_trials`` caps the pairs below ``--specdec-max-trials`` for a comparison that needs no decision
        on its speedup (claim g reads only the plain arm).

        ``baseline`` / ``treatment`` pair any two arms instead, e.g. flash attention off
        vs on (``Arm("fa-on", options={"flash_attn": True})``) or two models
        (``Arm("7b", options={"model": "qwen2.5:7b"})``). The conditions are keywords, one axis each
        (:mod:`pytest_specdec.axes`), over the test's markers: ``num_draft`` (γ), ``temperature`` /
        ``top_p`` (both arms sample; SD is then checked lossless by its seeds or its distribution),
        ``context`` (that many tokens of text before every prompt; a length beyond the model's window
        or this machine's memory skips the test with the numbers).
        """
        category, chosen = self._prompt_choice(category, prompts, "compare")
        spec = ComparisonSpec(
            category, target, draft, max_tokens, baseline, treatment, max_trials,
            conditions=self._conditions(conditions, "compare"), prompt_set=chosen,
        )  # fmt: skip
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
        category: str | None = None,
        *,
        prompts: Sequence[str] | str | None = None,
        max_tokens: int | None = None,
        max_trials: int | None = None,
        plot: str | Path | None = None,
        **axis: Sequence[object],
    ) -> list[Result]:
        """``compare`` at each value of one axis: ``sweep(num_draft=[1, 2, 4])``, ``sweep(temperature=[0, 0.7])``,
        ``sweep(context=[0, 2048, 8192])``. The summary says, decode and end to end, where SD stops paying off
        and where the verdict changes (over γ also the best γ and each γ's break-even α); a plot (``plot``,
        else beside ``--specdec-plot``) draws it. A value this machine cannot run (a context beyond the
        window or the memory) is not measured, and the summary says why. Then fails if any value failed.

        Other axes keep the test's markers' values (a temperature sweep takes the marker's top-p).
        """
        return self._sweep(category, axis, max_tokens=max_tokens, max_trials=max_trials, plot=plot, where="sweep",
                           prompts=prompts)  # fmt: skip

    def temperature_sweep(
        self,
        temperatures: Sequence[float],
        category: str = "code",
        *,
        top_p: float | None = None,
        max_tokens: int | None = None,
        max_trials: int | None = None,
    ) -> list[Result]:
        """``sweep(temperature=temperatures)`` (kept as an alias); ``top_p`` overrides the marker's for every T > 0."""
        marked = self._expectations().conditions
        if top_p is not None:
            try:
                marked = from_keywords({"temperature": 1.0, "top_p": top_p}, marked, "temperature_sweep")
            except SpecdecUsageError as error:
                self._kept_nothing(Unmeasured.REFUSED, f"temperature_sweep(): {error}")
        return self._sweep(category, {"temperature": temperatures}, max_tokens=max_tokens, max_trials=max_trials,
                           where="temperature_sweep", marked=marked)  # fmt: skip

    def context_sweep(
        self,
        lengths: Sequence[int],
        category: str = "code",
        *,
        max_tokens: int | None = None,
        max_trials: int | None = None,
        plot: str | Path | None = None,
    ) -> list[Result]:
        """``sweep(context=lengths)`` (kept as an alias)."""
        return self._sweep(category, {"context": lengths}, max_tokens=max_tokens, max_trials=max_trials, plot=plot,
                           where="context_sweep")  # fmt: skip

    def _sweep(
        self,
        category: str | None,
        given: Mapping[str, Sequence[object]],
        *,
        max_tokens: int | None,
        max_trials: int | None,
        plot: str | Path | None = None,
        where: str,
        marked: Conditions | None = None,
        prompts: Sequence[str] | str | None = None,
    ) -> list[Result]:
        category, chosen = self._prompt_choice(category, prompts, where)
        try:
            axis, values = sweep_axis(given, where)
            base = self._expectations().conditions if marked is None else marked
            settings = [from_keywords({axis.keyword: value}, base, where) for value in values]
            repeated = [value for index, value in enumerate(values) if settings[index] in settings[:index]]
            if repeated:
                raise SpecdecUsageError(
                    f"{where}({axis.keyword}={list(values)!r}) names {repeated[0]!r} twice — each value is measured "
                    "once: remove the repeat"
                )
        except SpecdecUsageError as error:
            self._kept_nothing(Unmeasured.REFUSED, f"{where}(): {error}")
        results, skipped = [], []
        for conditions in settings:
            try:
                spec = ComparisonSpec(category, max_tokens=max_tokens, max_trials=max_trials, conditions=conditions,
                                      prompt_set=chosen)  # fmt: skip
                results.append(self._measure(spec, skip_unmeasurable=False))
            except NotMeasurableHere as error:
                skipped.append(str(error))
        nodeid = stored_nodeid(self._request.node)
        points = [sweep_point(axis, r.record, r.comparison) for r in results]
        self._session.notes.append(sweep_line(nodeid, axis, category, points, skipped))
        wanted = plot or self._session.settings.outputs.get("plot")
        if wanted and points:
            path = (
                Path(wanted) if plot else Path(wanted).with_name(f"{Path(wanted).stem}-{axis.name}-{_slug(nodeid)}.png")
            )
            try:
                sweep_plot(axis, points, path, f"{nodeid}: speedup by {axis.title} [{category}]", skipped)
                self.note(f"{axis.title} sweep plot: {path}")
            except ImportError as error:
                self.note(f"cannot draw {path}: {error.name} is not installed — pip install 'pytest-specdec[plot]'")
            except (OSError, SpecdecUsageError) as error:
                self.note(f"cannot write {path}: {error} — choose a writable .png path")
        if not results:
            pytest.skip(f"no value of {axis.keyword}={list(values)} is measurable here: {'; '.join(skipped)}")
        labels = {id(r): p.label for r, p in zip(results, points, strict=True)}
        _enforce_each(results, lambda r: labels[id(r)])
        return results

    def _kept_nothing(self, kind: Unmeasured, line: str) -> NoReturn:
        """Fail the test in one line, and say in the results why it kept nothing (the gate reads that, not the line)."""
        self._session.unmeasured.append(UnmeasuredTest(stored_nodeid(self._request.node), kind, line))
        # from None: called while handling the refusal, which would otherwise print a second time above it
        raise pytest.fail.Exception(f"{line} — {NO_RESULT_KEPT}", pytrace=False) from None

    def _prompt_choice(self, category: str | None, prompts: object, where: str) -> tuple[str, PromptSet | None]:
        """The content class and the user's prompt set asked for; a bad choice fails the test in one line."""
        try:
            return self._session.prompt_choice(category, prompts)
        except SpecdecUsageError as error:
            self._kept_nothing(Unmeasured.REFUSED, f"{where}(): {error}")

    def _expectations(self) -> Expectations:
        found: Expectations = self._request.node.stash.get(expectations_key, Expectations())
        return found

    def _conditions(self, given: Mapping[str, object], where: str) -> Conditions:
        """``compare``'s condition keywords over the markers' conditions; a bad one fails the test in one line."""
        try:
            return from_keywords({k: v for k, v in given.items() if v is not None}, self._expectations().conditions,
                                 where)  # fmt: skip
        except SpecdecUsageError as error:
            self._kept_nothing(Unmeasured.REFUSED, f"{where}(): {error}")

    @property
    def machine(self) -> MachineProfile:
        """This machine's chip, memory, bandwidth and usable working set."""
        return machine_profile()

    @property
    def gating(self) -> bool:
        """Whether this test's claim gates under the current profile (else its verdicts are reference)."""
        expect = self._expectations()
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
        except PlainArmSpeculates as error:
            self._kept_nothing(Unmeasured.PLAIN_SPECULATES, str(error))
        except ModelLoadError as error:  # a target= or draft= of the test's own that is absent or unloadable
            self._kept_nothing(Unmeasured.MODEL_UNAVAILABLE, str(error))
        except (SpecdecUsageError, BackendRuntimeError) as error:
            self._kept_nothing(Unmeasured.REFUSED, str(error))
        except Exception as error:  # a backend library failing mid-run: one line, nothing kept
            if raised_in_user_code(error):
                raise  # the user's own code (a prompt builder, a hook): its own traceback, never the backend's
            name = self._session.settings.backend
            self._kept_nothing(
                Unmeasured.CRASHED, f"backend {name!r} failed while measuring: {type(error).__name__}: {error}"
            )
        finally:
            live.finish()
        self.result = result
        _record_properties(self._request, result)
        return result


BENCHMARKS = Path(__file__).resolve().parent / "benchmarks"


def raised_in_user_code(error: BaseException) -> bool:
    """Whether ``error``'s traceback passes through code that is neither pytest-specdec's, the standard library's
    nor an installed package's: a user's own prompt builder, hook or callable, whose failure is theirs to read.

    >>> try:
    ...     {}["missing"]
    ... except KeyError as error:
    ...     raised_in_user_code(error)  # a doctest's frame ("<doctest …>") is no file of the user's
    False
    """
    import sysconfig

    paths = sysconfig.get_paths()
    library = [
        Path(folder).resolve()
        for folder in {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")}
        | {str(Path(__file__).resolve().parent)}
        | {p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")}
    ]
    frame = error.__traceback__
    while frame is not None:
        name = frame.tb_frame.f_code.co_filename
        # "<string>" (a dataclass's __init__), "<template>" (Jinja) and relative names (Cython) are a library's
        if Path(name).is_absolute() and not any(Path(name).resolve().is_relative_to(lib) for lib in library):
            return True
        frame = frame.tb_next
    return False


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
    """A failure fails the test in one line, wrapped to the terminal; a warning (inconclusive, drift) is a warning."""
    if failure:
        import shutil
        import textwrap

        pytest.fail("\n".join(textwrap.wrap(failure, shutil.get_terminal_size().columns)), pytrace=False)
    if warning:
        warnings.warn(SpecdecInconclusiveWarning(warning), stacklevel=3)
