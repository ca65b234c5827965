"""Speedup by context length, decode and end to end: does SD still pay off behind a long prompt?

Not a claim of the document: it reports a 128K-context plain figure and no SD figure at long
context. Behind a long prefix every verify step attends over more keys and the first token
waits for the prefill (the draft's too), so the decode and end-to-end speedups can part. Each
length is a full paired comparison behind that many tokens of the suite's own text
(docs/method.md, "Context length"); a length beyond the model's window or this machine's memory
is listed as not measured, with its numbers. The summary line says where each answer changes;
``--specdec-plot PATH.png`` also draws it (``PATH-context-….png``).
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import only_for
from pytest_specdec.fixture import SpecdecFixture


@pytest.mark.sweep
def test_context_sweep_on_copy(specdec: SpecdecFixture) -> None:
    only_for(specdec, ["llama-cpp", "llama-server", "mlx"])
    specdec.sweep(context=[0, 2048, 8192], category="copy")
