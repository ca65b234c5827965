"""Several clients at once: ``compare(concurrency=4)``, ``@pytest.mark.concurrency(4)``, ``sweep(concurrency=[1, 2, 4])``.

SD's gain is known to shrink as a server batches parallel requests (its verify steps compete with
the other streams' decode steps for the same compute), and a Mac owner's server often serves
several clients at once (coding agents, Ollama's ``OLLAMA_NUM_PARALLEL``, llama-server's ``-np``).
At concurrency *N* each arm's server is started with *N* slots (the backend option ``parallel``)
and *N* streams of the same prompt are in flight at once; the verdict reads the **aggregate**
throughput (every stream's decode tokens over the span from the first stream's first token to
the last stream's last token), and each stream's tok/s and time to first token are noted
(:mod:`pytest_specdec.measure.streams`). A backend that runs in this process, one request at a
time, refuses it in one line.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pytest_specdec.axes import Axis, whole_number

MAX_STREAMS = 64


@runtime_checkable
class ServesStreams(Protocol):
    """A backend whose server can take several requests at once, started with ``parallel=N`` slots."""

    def streams_refusal(self, streams: int) -> str | None:
        """Why it cannot serve ``streams`` requests at once as asked (``None``: it can)."""
        ...


class Concurrency(Axis[int]):
    """Streams of the same prompt in flight at once, on a server started for that many."""

    name = keyword = "concurrency"
    title = "concurrency"
    axis_label = "streams in flight at once"
    order = 40
    default = 1
    marker = "concurrency"
    marker_help = (
        "concurrency(N): N streams of each prompt at once on a server started with N slots; the verdict reads the "
        "aggregate throughput (server backends)"
    )

    def parse(self, value: object) -> int:
        return whole_number("concurrency", value, low=1, high=MAX_STREAMS)

    def example(self) -> object:
        return 4

    def label(self, value: int) -> str:
        return f"streams={value}"

    def statement(self, value: int) -> str:
        return f", {value} streams at once (aggregate throughput)"

    def backend_options(self, value: int) -> dict[str, str]:
        return {"parallel": str(value)}

    def refusal(self, value: int, backend: object) -> str | None:
        if isinstance(backend, ServesStreams):
            said = backend.streams_refusal(value)
            return None if said is None else f"concurrency={value}: {said}"
        name = getattr(backend, "name", type(backend).__name__)
        return (
            f"concurrency={value}: backend {name!r} runs in this process and serves one request at a time — measure "
            "concurrency on a server backend (llama-server)"
        )


AXIS = CONCURRENCY = Concurrency()
