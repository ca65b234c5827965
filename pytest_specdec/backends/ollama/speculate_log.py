"""Drafted and accepted tokens as Ollama's MLX engine logs them, per request, in the server's log.

Since v0.32.6 (commit 3ff2dcb, "mlxrunner: count every speculative round and log stats at info") the MLX
runner writes one INFO line per request when its decoder closes (``x/mlxrunner/speculate_stats.go``,
``speculationSession.logStats``)::

    time=… level=INFO source=speculate_stats.go:62 msg="speculative decode stats" iterations=120 drafted=310
    accepted=255 acceptance=0.82 avg_draft=2.58 max_draft=5 avg_accepted=2.12 depth_over_time="0.0/0 1.9/3"

through slog's text handler (``logutil/logutil.go``), passed on unchanged to the server's stderr
(``llm/status.go``). It returns early for a request that does not draft: a model without a drafter, or one
asking for ``logprobs`` / ``top_logprobs`` (``speculate.go``, ``open``: drafting off). Before v0.32.6 the line
is at DEBUG. The API itself reports no draft counts, so where the plugin started the server these lines are
the observed counts; elsewhere the engagement probe judges.
"""

from __future__ import annotations

import re

MESSAGE = 'msg="speculative decode stats"'
INFO_SINCE = (0, 32, 6)
PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def speculation_counts(log: str) -> list[tuple[int, int]]:
    """``(drafted, accepted)`` of each stats line in ``log``, in order.

    >>> speculation_counts('level=INFO source=speculate_stats.go:62 msg="speculative decode stats" '
    ...                    'iterations=12 drafted=31 accepted=25 acceptance=0.81 depth_over_time="1.9/3 3.0/4"')
    [(31, 25)]
    """
    found = []
    for line in log.splitlines():
        if MESSAGE not in line:
            continue
        fields = dict(PAIR.findall(line.split(MESSAGE, 1)[1]))
        try:
            found.append((int(fields["drafted"]), int(fields["accepted"])))
        except (KeyError, ValueError):
            continue  # a line of another shape is not read as counts
    return found
