"""MTPLX's depth: refused out of range, lowered by its long-context cap, reported as it ran (stand-in of 2.12.2)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair
from pytest_specdec.backends.mtplx.adapter import MtplxBackend
from pytest_specdec.backends.mtplx.standin import MtplxHandler
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer
from pytest_specdec.errors import BackendRuntimeError

PROMPT = "one two three four five six seven eight nine ten"


@pytest.fixture
def connect(engine: GenerationEngine) -> Iterator[Callable[..., MtplxBackend]]:
    started: list[tuple[StandinServer, MtplxBackend]] = []

    def connecting(**settings: str) -> MtplxBackend:
        server = StandinServer(MtplxHandler, engine, settings=settings).start()
        backend = MtplxBackend(ModelPair("ignored"), {"url": server.url})
        started.append((server, backend))
        return backend

    yield connecting
    for server, backend in started:
        backend.close()
        server.stop()


def run(backend: MtplxBackend, gamma: int) -> object:
    stream = backend.generate(GenerationRequest(PROMPT, Arm("sd", True, gamma), 8, seed=1))
    while True:
        try:
            next(stream)
        except StopIteration as stop:
            return stop.value


def test_a_depth_the_model_family_does_not_have_is_the_servers_400(connect: Callable[..., MtplxBackend]) -> None:
    with pytest.raises(BackendRuntimeError, match=r"HTTP 400 .*depth must be between 1 and 3"):
        run(connect(), 5)


def test_a_depth_lowered_by_the_long_context_cap_is_never_labelled_with_gamma(
    connect: Callable[..., MtplxBackend],
) -> None:
    backend = connect(long_context_depth="2", long_context_chars="10")
    with pytest.raises(BackendRuntimeError, match=r"ran mtp_depth 2 where γ=3 was asked \(requested_mtp_depth 3"):
        run(backend, 3)
    assert run(backend, 2).drafted > 0  # type: ignore[attr-defined]


def test_the_adaptive_policy_is_recorded(connect: Callable[..., MtplxBackend]) -> None:
    assert connect().fingerprint().details["adaptive"] == "none"
    assert connect(adaptive="expected_value").fingerprint().details["adaptive"] == "expected_value"
