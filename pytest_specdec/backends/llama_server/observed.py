"""What a running llama-server says of its own speculation: ``/slots``, ``/metrics`` and its log.

* ``GET /slots``: each slot's ``speculative`` is ``can_speculate()``
  (``tools/server/server-context.cpp``) — false with ``--spec-type none``, and false when
  the draft set-up failed and the server carried on without SD (it logs "failed to
  initialize speculative decoding context", ``load_model`` in the same file). Off with
  ``--no-slots``: then the server does not say.
* ``GET /metrics`` (``--metrics``): ``llamacpp:spec_decode_num_draft_tokens_total`` and
  ``llamacpp:spec_decode_num_drafts_total`` (``tools/server/server-task.cpp``), the draft
  length each draft really had, on average.
"""

from __future__ import annotations

import re

from pytest_specdec.backends.base import NotRun, SpeculationEvidence
from pytest_specdec.backends.http_client import HttpService
from pytest_specdec.backends.server_process import ServerProcess
from pytest_specdec.errors import BackendRuntimeError

DRAFT_METRIC = re.compile(r"^llamacpp:spec_decode_(num_draft_tokens|num_drafts)_total\s+(\S+)", re.MULTILINE)
FAILED_SET_UP = "failed to initialize speculative decoding"


def slots_speculate(service: HttpService) -> bool | None:
    """Whether any slot can speculate (None: ``/slots`` is off or says nothing)."""
    try:
        slots = service.get_list("/slots")
    except BackendRuntimeError:
        return None
    flags = [slot.get("speculative") for slot in slots if isinstance(slot, dict)]
    return any(flag is True for flag in flags) if flags and all(isinstance(f, bool) for f in flags) else None


def slot_count(service: HttpService) -> int:
    """How many slots the server runs, by its own ``GET /slots`` (0: ``/slots`` is off or says nothing)."""
    try:
        return len([slot for slot in service.get_list("/slots") if isinstance(slot, dict)])
    except BackendRuntimeError:
        return 0


def draft_rounds(service: HttpService) -> tuple[int, int] | None:
    """(draft tokens, drafts) since the server started, from ``/metrics``."""
    try:
        found = dict(DRAFT_METRIC.findall(service.get_text("/metrics")))
    except BackendRuntimeError:
        return None
    if "num_draft_tokens" not in found or "num_drafts" not in found:
        return None
    return int(float(found["num_draft_tokens"])), int(float(found["num_drafts"]))


def log_line(server: ServerProcess | None, containing: str) -> str:
    """The first line of a managed server's log that contains ``containing``."""
    if server is None or server.log_path is None or not server.log_path.is_file():
        return ""
    text = server.log_path.read_text(encoding="utf-8", errors="replace")
    return next((line.strip() for line in text.splitlines() if containing in line), "")


def said_by_servers(
    sd_label: str, sd_flag: bool | None, plain_flag: bool | None, sd_server: ServerProcess | None, lengths: str = ""
) -> SpeculationEvidence:
    """The evidence both arms' servers give, with the SD server's own log line where it failed to set up
    (``lengths``: what the SD server drafts, from knobs.draft_length)."""
    why = None
    if sd_flag is False:  # asked to speculate (its --spec-type), it set no drafter up (tools/server's slot params)
        said = log_line(sd_server, FAILED_SET_UP)
        reason = f"the {sd_label} server is not speculating (GET /slots: speculative=false" + (
            f"; its log: {said})" if said else ")"
        )
        why = NotRun.DRAFTER_NOT_LOADED
    elif plain_flag is True:
        reason = "the plain server speculates (GET /slots: speculative=true) — start it with --spec-type none"
    elif sd_flag is True and lengths.startswith("upstream"):  # prompts too short or without repeats for its lookup
        reason = f"not engaged at upstream defaults: the server speculates (GET /slots), and at {lengths} it found nothing to draft"
        why = NotRun.NOTHING_TO_DRAFT
    elif sd_flag is True:
        reason = "the SD server speculates (GET /slots); the arm found nothing to draft"
        why = NotRun.NOTHING_TO_DRAFT
    else:
        reason = "the servers do not say (GET /slots is off: --no-slots)"
    return SpeculationEvidence(sd_arm=sd_flag, plain_arm=plain_flag, reason=reason, why=why)
