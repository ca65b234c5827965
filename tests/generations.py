"""One generation run to its end, as the measuring loop runs it: the units that arrived and the stats returned."""

from __future__ import annotations

from pytest_specdec.backends.base import Backend, GenerationRequest, GenerationStats


def generated(backend: Backend, request: GenerationRequest) -> tuple[tuple[int, ...], GenerationStats]:
    """Every burst's units, in order, and the ``GenerationStats`` the stream returns."""
    stream = backend.generate(request)
    units: list[int] = []
    while True:
        try:
            units.extend(next(stream).token_ids)
        except StopIteration as stop:
            return tuple(units), stop.value
