"""pytest glue: options, markers, fixtures, progress and the terminal summary.

Everything with logic lives in the pytest-free modules; this file translates
between pytest and :class:`~pytest_specdec.session.SpecdecSession`.
"""

from __future__ import annotations

import importlib
import os
import types
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_specdec.axes import from_markers, registered_axes
from pytest_specdec.backends import (
    backend_spec,
    broken_backends,
    distribution_versions,
    missing_runtime,
    profile_pairs,
    registered_backends,
    require_runtime,
)
from pytest_specdec.backends.base import Backend, ModelPair
from pytest_specdec.backends.server_process import interrupt_on_sigterm, server_scope
from pytest_specdec.claims import Expectations, parse_acceptance, parse_claim, parse_speedup
from pytest_specdec.config import all_options, build_settings, prompt_sets, read_pyproject, requested_backend
from pytest_specdec.errors import ModelLoadError, SpecdecUsageError
from pytest_specdec.fixture import SpecdecFixture, expectations_key, stored_nodeid
from pytest_specdec.hardware import environment_fitness, machine_class
from pytest_specdec.machine_load import load_average
from pytest_specdec.render import report, verdict_table
from pytest_specdec.render.outputs import check_output_folders, render_outputs
from pytest_specdec.session import SpecdecSession
from pytest_specdec.store.ledger import check_store_folder, default_root
from pytest_specdec.store.records import MEMORY_KEY, Unmeasured, UnmeasuredTest
from pytest_specdec.store.timings import expect, keep_timings, read_timings, timings_file

session_key = pytest.StashKey[SpecdecSession]()
deselected_key = pytest.StashKey[bool]()
finish_key = pytest.StashKey[list[str]]()
# This run's seconds per measuring test (set up and run) and whether it skipped; a test whose run never
# reported (Ctrl-C) is not kept, and a skip never replaces a time measured before.
timings_key = pytest.StashKey[dict[str, tuple[float, bool]]]()
setup_key = pytest.StashKey[float]()
sigterm_key = pytest.StashKey[Callable[[], None]]()
servers_key = pytest.StashKey[Callable[[], int]]()
# A configuration problem, kept until a test asks for the plugin: a session with no specdec test never fails on it.
problem_key = pytest.StashKey[str]()
asked_key = pytest.StashKey[bool]()  # whether a collected test uses the plugin: if none does, it writes nothing
UNDER_XDIST = (
    "pytest-specdec measurements cannot run under pytest-xdist (-n): timings taken beside other workers share "
    "the machine's memory bandwidth and are not worth keeping — run the measuring tests without -n"
)

MARKERS = (
    "speedup(min=None, max=None, of='decode'): the claimed range of the SD speedup (SD tok/s / plain tok/s; of='end-to-end': prompt in to last token out, each arm's prefill included)",
    "acceptance(min=None): the claimed minimum acceptance rate of draft tokens",
    "claim(id, source, quote, applies_to=()): where the claim comes from and which model profiles it gates",
    "sweep: one axis measured over several values (long): `make sweeps` runs these, `make bench` leaves them out "
    "(-m 'not sweep')",
)  # and each axis's own marker (pytest_specdec.axes)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--backend`` / ``--specdec-*`` options and their ini twins."""
    group = parser.getgroup("specdec", "speculative-decoding benchmarks (pytest-specdec)")
    try:
        options = all_options()
    except SpecdecUsageError as error:  # a broken third-party backend package
        raise pytest.UsageError(str(error)) from None
    told = {
        "backend": ": " + ", ".join(sorted(registered_backends())),
        "backend_option": "; each backend's keys: pytest-specdec backends",
    }
    for defined in options:
        option = replace(defined, help=defined.help + told.get(defined.key, ""))
        names = ["--backend", option.flag] if option.key == "backend" else [option.flag]
        dest = "specdec_" + option.key
        if option.kind == "bool":
            group.addoption(*names, action="store_true", default=None, dest=dest, help=option.help)
        elif option.kind == "list":
            group.addoption(*names, action="append", default=None, dest=dest, metavar="KEY=VALUE", help=option.help)
        else:
            said = "" if "(default" in option.help or option.default is None else f" (default: {option.default})"
            group.addoption(*names, default=None, dest=dest, help=option.help + said)
        ini_type = {"bool": "bool", "list": "args"}.get(option.kind, "string")
        parser.addini(option.ini, option.help, type=ini_type, default=None)  # type: ignore[arg-type]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Load a backend's native libraries (its spec's ``native_first``) before any conftest imports numpy.

    On some CUDA images, numpy's native libraries loaded before llama.cpp's CUDA
    libraries make the first ``Llama(...)`` crash; ``llama_cpp`` loads its own
    libraries before it imports numpy, so importing it first is safe.
    """
    name = requested_backend(args)
    spec = registered_backends().get(name or "")
    if spec is not None and spec.native_first and missing_runtime(spec) is None:
        importlib.import_module(spec.native_first)


def pytest_configure(config: pytest.Config) -> None:
    """Register markers, validate settings and create the session object.

    A problem with the settings is kept, not raised: the plugin is inert until a test asks for it, so a session
    that collects no specdec test runs as if the plugin were not installed (:func:`pytest_collection_modifyitems`
    says the problem in one line once one does).
    """
    for marker in (*MARKERS, *(axis.marker_help for axis in registered_axes() if axis.marker)):
        config.addinivalue_line("markers", marker)
    config.pluginmanager.register(_backend_fixtures(), "specdec-backend-fixtures")
    try:
        settings = build_settings(
            lambda key: config.getoption("specdec_" + key),
            config.getini,
            read_pyproject(config.rootpath),
        )
        spec = backend_spec(settings.backend)
        if settings.backend_explicit:
            require_runtime(spec)
        # Every option is checked before the first generation, not after measuring.
        verdict_table.check_columns(settings.columns)
        if settings.plain_runtime:
            backend_spec(settings.plain_runtime, option="--specdec-plain-runtime")
        check_output_folders(settings.outputs, config.invocation_params.dir)
        root = default_root(config.rootpath, settings.baselines)
        check_store_folder(root)
        sets = prompt_sets(settings, config.rootpath)
    except SpecdecUsageError as error:
        config.stash[problem_key] = str(error)
        return
    config.stash[session_key] = SpecdecSession.create(settings, machine_class(), root, sets)
    config.stash[session_key].command = ("pytest", *config.invocation_params.args)
    # SIGTERM (a CI cancel, `kill`) stops the run as Ctrl-C does: the same teardown stops managed servers.
    config.stash[sigterm_key] = interrupt_on_sigterm()
    config.stash[servers_key] = server_scope()  # the servers this run starts, stopped at its end whatever happens


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Backend, versions, model pair, machine class (or the configuration problem a specdec test will fail on)."""
    if problem_key in config.stash:
        return report.wrapped([f"specdec: not configured, so specdec tests fail: {config.stash[problem_key]}"],
                              config.get_terminal_writer().fullwidth)  # fmt: skip
    session = config.stash[session_key]
    settings = session.settings
    spec = backend_spec(settings.backend)
    versions = ", ".join(f"{k} {v}" for k, v in distribution_versions(spec).items()) or "-"
    fitness = environment_fitness()
    power = ", ".join(f"{k}={v}" for k, v in fitness.details.items())
    own = "" if settings.num_draft_explicit else " (or the engine's own default)"  # the row says which ran
    lines = [
        f"specdec: backend={settings.backend} ({versions}), profile={settings.profile}"
        + (f", environment: {fitness.reason}{' (' + power + ')' if power else ''}" if fitness.details else ""),
        f"specdec: target={settings.pair.target}, draft={settings.pair.draft}, γ={settings.num_draft}{own}, "
        f"max_tokens={settings.max_tokens}, machine={session.machine_class}",
        *(f"specdec: warning: {line}" for line in broken_backends().values()),
    ]
    load, cores = load_average(), os.cpu_count() or 1
    if load is not None and load > cores:  # said before the first pair; each comparison's own reading follows it
        lines.append(f"specdec: warning: the machine is busy (load average {load:.1f} on {cores} cores): intervals "
                     "will be wide — measure when it is otherwise idle")  # fmt: skip
    return report.wrapped(lines, config.get_terminal_writer().fullwidth)


def _expectations(item: pytest.Item) -> Expectations:
    parsers = {"speedup": parse_speedup, "acceptance": parse_acceptance, "claim": parse_claim}

    def lookup(name: str) -> tuple[tuple[object, ...], dict[str, object]] | None:
        marker = item.get_closest_marker(name)
        return None if marker is None else (tuple(marker.args), dict(marker.kwargs))

    parsed: dict[str, Any] = {}
    try:
        for name, parse in parsers.items():
            if (found := lookup(name)) is not None:
                parsed[name] = parse(*found)
        parsed["conditions"] = from_markers(lookup)
    except SpecdecUsageError as error:
        raise pytest.UsageError(f"{item.nodeid}: {error}") from None
    return Expectations(**parsed)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected: a deselected specdec test asks for nothing
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Parse every test's markers (bad ones are usage errors) and load the backend once — only when a test asks
    for the plugin: a configuration problem is said then, in one line, before anything is measured."""
    # The backends are looked up once (entry points are scanned per call), not once per collected test.
    fixtures = frozenset({"specdec", *(spec.fixture_name for spec in registered_backends().values())})
    asking = [item for item in items if _asks(item, fixtures)]
    config.stash[asked_key] = bool(asking)
    for item in asking:  # an unrelated test's marker of the same name is none of the plugin's business
        item.stash[expectations_key] = _expectations(item)
    if not asking or config.option.collectonly or hasattr(config, "workerinput"):
        return  # under xdist each asking test fails in its fixture, and every other test runs
    if problem_key in config.stash:
        raise pytest.UsageError(config.stash[problem_key])
    if any(_measuring(item) for item in asking):
        specdec_session = config.stash[session_key]
        try:
            require_runtime(backend_spec(specdec_session.settings.backend))
            specdec_session.backend()
            specdec_session.ledger.store.load(specdec_session.settings.backend)
        except ModelLoadError as error:  # said in one line, and kept as each measuring test's reason (the gate's cause)
            specdec_session.unmeasured += [UnmeasuredTest(stored_nodeid(item), Unmeasured.MODEL_UNAVAILABLE, str(error))
                                           for item in asking if _measuring(item)]  # fmt: skip
            raise pytest.UsageError(str(error)) from None
        except SpecdecUsageError as error:
            raise pytest.UsageError(str(error)) from None


def _measuring(item: pytest.Item) -> bool:
    return "specdec" in getattr(item, "fixturenames", ())


def _asks(item: pytest.Item, fixtures: frozenset[str]) -> bool:
    """Whether a test uses the plugin: the ``specdec`` fixture or a backend's (``fixtures``: their names)."""
    return not fixtures.isdisjoint(getattr(item, "fixturenames", ()))


def _refused(config: pytest.Config) -> None:
    """Fail the asking test in one line under xdist or with the configuration problem (every other test runs)."""
    if hasattr(config, "workerinput"):
        pytest.fail(UNDER_XDIST, pytrace=False)
    if problem_key in config.stash:
        pytest.fail(config.stash[problem_key], pytrace=False)


def _timings_path(config: pytest.Config) -> Path:
    session = config.stash[session_key]
    return timings_file(session.machine_class, session.settings.backend, session.settings.profile)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Say the run's expected duration before its first pair (this machine's earlier timings, or that none exist)."""
    config = session.config
    measuring = [item.nodeid for item in session.items if _measuring(item)]
    if session_key not in config.stash or config.option.collectonly or not measuring:
        return
    config.stash[timings_key] = {}
    expected = expect(measuring, read_timings(_timings_path(config)))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    specdec = config.stash[session_key]
    said = [f"specdec: {specdec.settings.backend}: {expected.text}"]
    if specdec.budget is not None:
        specdec.budget.tests = len(measuring)
        said.append(f"specdec: time budget {report.duration(specdec.budget.total_s)} for {len(measuring)} test(s), "
                    "shared in turns: each comparison stops at the last look that fits its share")  # fmt: skip
    if reporter is not None:
        for line in report.wrapped(said, reporter._tw.fullwidth):
            reporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Time each measuring test (set-up included: the first one loads the models) for the next run's estimate."""
    report = yield
    found = item.config.stash.get(timings_key, None)
    if found is None or not _measuring(item):
        return report
    if report.when == "setup":
        item.stash[setup_key] = report.duration  # kept until the run reports: a set-up alone is no timing
        if report.skipped:  # skipped while set up (its backend absent): about no time
            found[item.nodeid] = (report.duration, True)
    elif report.when == "call":
        found[item.nodeid] = (item.stash.get(setup_key, 0.0) + report.duration, report.skipped)
    return report


@pytest.fixture
def specdec(request: pytest.FixtureRequest) -> SpecdecFixture:
    """Paired plain-vs-SD measurements on the ``--backend`` choice: ``specdec.compare("code")``."""
    _refused(request.config)
    return SpecdecFixture(request, request.config.stash[session_key])


def _backend_fixture(name: str) -> Any:
    @pytest.fixture(scope="session")
    def fixture(request: pytest.FixtureRequest) -> Backend:
        _refused(request.config)
        spec = backend_spec(name)
        missing = missing_runtime(spec)
        if missing is not None:
            pytest.skip(f"backend {name!r} is not available here: {missing!r} is not installed (extra [{spec.extra}])")
        session = request.config.stash[session_key]
        try:
            return session.backend(name=name, pair=_pair_for(session, name))
        except SpecdecUsageError as error:
            pytest.skip(f"backend {name!r} cannot load its models here: {error}")

    fixture.__doc__ = f"The {name} backend with its configured model pair (session-scoped; skipped if absent)."
    return fixture


def _pair_for(session: SpecdecSession, name: str) -> ModelPair | None:
    return session.settings.pair if name == session.settings.backend else profile_pairs("embedded").get(name)


def _backend_fixtures() -> types.ModuleType:
    """One session fixture per registered backend (``mlx_backend``, ``llama_cpp_backend``, ...)."""
    holder = types.ModuleType("pytest_specdec.backend_fixtures", _backend_fixtures.__doc__)
    for spec in registered_backends().values():
        setattr(holder, spec.fixture_name, _backend_fixture(spec.name))
    return holder


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Remember that a subset ran: stale baselines cannot be judged then."""
    if items:
        items[0].config.stash[deselected_key] = True


def _whole_suite(session: pytest.Session) -> tuple[set[str] | None, tuple[str, ...]]:
    config = session.config
    if config.stash.get(deselected_key, False) or config.getoption("lf", False) or config.getoption("sw", False):
        return None, ()
    scopes = []
    for arg in config.args:
        path = config.invocation_params.dir / arg
        if "::" in arg or not path.is_dir():
            return None, ()
        try:  # not resolved: benchmarks/ is a link to the package's claims, and node ids keep its name
            relative = Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(config.rootpath))).as_posix()
            scopes.append("" if relative == "." else relative)
        except ValueError:
            return None, ()
    return {stored_nodeid(item) for item in session.items}, tuple(scopes)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write baselines, candidates, history and the report files, once."""
    config = session.config
    if (
        session_key not in config.stash
        or getattr(config.option, "numprocesses", None)
        or hasattr(config, "workerinput")
    ):
        return  # nothing is measured under xdist: neither its controller nor a worker has anything to keep
    if not config.stash.get(asked_key, False):
        return  # no test asked for the plugin: it writes nothing (not even the store's lock)
    specdec_session = config.stash[session_key]
    if timings_key in config.stash:
        path, timed = _timings_path(config), config.stash[timings_key]
        earlier = read_timings(path)
        keep_timings(path, {n: s for n, (s, skipped) in timed.items() if not skipped or n not in earlier})
    ledger = specdec_session.ledger
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    if ledger.records:
        import psutil
        from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info
        from pytest_benchmark.utils import get_commit_info

        ledger.machine_info = {**pytest_benchmark_generate_machine_info(), MEMORY_KEY: psutil.virtual_memory().total}
        ledger.commit_info = get_commit_info()
    collected, scopes = _whole_suite(session)
    specdec_session.unmeasured += _errored(config)
    lines: list[str] = []
    errors: list[str] = []
    try:
        finished = ledger.finish(interrupted=interrupted, collected=collected, scopes=scopes)
        specdec_session.mark_drifted(finished.drifted)
        lines += finished.lines
        errors += [finished.error] if finished.error else []
        errors += [f"{line} (--specdec-fail-on-drift)" for line in finished.failed]
        if specdec_session.records or specdec_session.unmeasured:
            base = config.invocation_params.dir
            wanted = {key: base / value for key, value in specdec_session.settings.outputs.items()
                      if specdec_session.records or key == "json"}  # fmt: skip
            written, output_errors = render_outputs(specdec_session.run_record(interrupted=interrupted), wanted)
            lines += [f"wrote {path}" for path in written]
            errors += output_errors
    except KeyboardInterrupt:
        # Every file is written whole or not at all (atomic writes): whatever was written stands.
        errors.append("interrupted while writing baselines and reports: each file is either complete or untouched")
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    config.stash[finish_key] = lines + [f"ERROR: {error}" for error in errors]
    if errors and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _errored(config: pytest.Config) -> list[UnmeasuredTest]:
    """Tests that errored while collected, set up or torn down: they kept nothing, as crashed (for the gate)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    reports = reporter.stats.get("error", []) if reporter is not None else []
    found = []
    for errored in reports:
        text = str(getattr(errored, "longreprtext", "") or "").strip()
        lines = [line.removeprefix("E").strip() for line in text.splitlines() if line.startswith("E ")]
        said = (lines or text.splitlines() or ["errored"])[-1][:300]
        found.append(UnmeasuredTest(errored.nodeid or "(collection)", Unmeasured.CRASHED, f"errored: {said}"))
    return found


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The notes and what was written, then the verdict table and one answer per claim: the last lines before
    pytest's own summary line, so the answer has not scrolled away when the run ends."""
    if session_key not in config.stash:
        return
    session = config.stash[session_key]
    records, finished = session.records, config.stash.get(finish_key, [])
    if not records and not finished:
        return
    width = terminalreporter._tw.fullwidth
    every = session.settings.notes == "all" or config.option.verbose > 0
    busy = report.wrapped(report.busy_lines(records), width)  # first: every timing below is read in its light
    written = report.wrapped(session.notes + finished, width)
    room = max(report.MOST_NOTE_LINES - len(busy) - len(written), 6)  # the rows' notes get what is left of 15 lines
    notes = busy + report.terminal_notes(records, width, every=every, room=room) + written
    if notes:
        terminalreporter.write_sep("-", "specdec notes")
        for line in notes:
            terminalreporter.write_line(line, red=line.startswith("ERROR"))
    if records:
        terminalreporter.write_sep("=", "specdec verdicts")
        terminalreporter.write_line(verdict_table.terminal_table(records, width, session.settings.columns))
        for line in report.claim_answers(records, width):
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Release every loaded backend."""
    try:
        if session_key in config.stash:
            config.stash[session_key].close()
    finally:  # a backend that fails to close (say, interrupted mid-request) never keeps the run's servers running
        if servers_key in config.stash:
            config.stash[servers_key]()
        if sigterm_key in config.stash:
            config.stash[sigterm_key]()
