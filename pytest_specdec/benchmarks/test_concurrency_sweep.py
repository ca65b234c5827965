"""SD as load rises: the speedup with 1, 2 and 4 streams of each prompt at once on servers started for that many.

Not a claim of the document, which measured one request at a time. A server that batches
several clients' requests spends each step's compute on all of them, so SD's verify steps
compete with the other streams' decode steps and its gain is expected to shrink as the load
rises. Each value is a full paired comparison of the aggregate throughput (every stream's
tokens over the span they took); each stream's own rate and time to first token are noted.
Runs on llama-server, the server backend whose slots the plugin sets (``-np``).
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import only_for
from pytest_specdec.fixture import SpecdecFixture


@pytest.mark.sweep
def test_concurrency_sweep_on_code(specdec: SpecdecFixture) -> None:
    only_for(specdec, ["llama-server"])
    specdec.sweep(concurrency=[1, 2, 4], category="code")
