"""What llama-server's plain server answers about tokens, and the servers at long context.

A managed server's context is its ``-c`` (``ctx`` option, 2048 unless set). A longer comparison
restarts the servers with the next power of two that holds it, as a user raises ``-c`` for long
documents; a ``ctx`` the user set is kept, and a prompt too long for it is the server's own error.
A server that cannot start at the grown ``-c`` makes that comparison not measurable here and the
servers go back to the ``-c`` they had, so the comparisons after it still run.
The user's own servers (``plain_url``/``sd_url``) keep theirs: their window is their ``/props``
``n_ctx``. llama.cpp allocates each server's KV cache for its whole context at start, so the
memory is counted at that size (src/llama-context.cpp: the cache is sized from ``n_ctx``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_specdec.backends.context import gguf_context, gguf_file_metadata
from pytest_specdec.errors import BackendUnavailable, NotMeasurableHere


class PlainServerQueries:
    """What the adapter asks the plain server about tokens: counts and text (``/tokenize``,
    ``/detokenize``), logits (``n_probs``), and the window and caches of a long context
    (:class:`~pytest_specdec.backends.context.KnowsContext`)."""

    _model: Path | None
    _draft: Path | None
    _ctx: int
    _parallel: int
    _ctx_set: bool
    _ctx_before_growth: int | None  # the -c to go back to if the servers cannot start at the grown one
    _started_since_growth: set[bool]  # which arm kinds (speculative or not) have started at the grown -c
    _one_at_a_time: bool

    def _plain_service(self) -> Any:
        raise NotImplementedError

    def _stop_all(self) -> None:
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the plain server's ``/tokenize`` (no special tokens)."""
        tokens = self._plain_service().post("/tokenize", {"content": text, "add_special": False}).get("tokens")
        return len(tokens) if isinstance(tokens, list) else 0

    def template_tokens(self) -> int:
        """The special tokens ``/completion`` adds to a text prompt (no chat template there: the BOS), by ``/tokenize``."""
        service = self._plain_service()
        answers = [
            service.post("/tokenize", {"content": "x", "add_special": special}).get("tokens")
            for special in (True, False)
        ]
        counts = [len(tokens) if isinstance(tokens, list) else 0 for tokens in answers]
        return max(counts[0] - counts[1], 0)

    def context_window(self) -> int:
        """The GGUF's ``context_length`` (managed; the ``ctx`` the user set where shorter), or the user's server's ``n_ctx``."""
        if self._model is None:
            props = self._plain_service().get("/props")
            return int((props.get("default_generation_settings") or {}).get("n_ctx") or 0)
        trained = gguf_context(gguf_file_metadata(self._model))[0]
        return min(trained, self._ctx) if self._ctx_set else trained

    def _sized(self, tokens: int) -> int:
        return self._ctx if self._ctx_set or self._model is None else max(self._ctx, 1 << (tokens - 1).bit_length())

    def context_bytes(self, tokens: int) -> int:
        """Both servers' KV caches (one where they run one at a time) at the ``-c`` that ``tokens`` needs,
        and the draft's weights in the SD server.

        The target's weights are mapped once for both servers (llama.cpp maps the GGUF by default; whether
        both servers may run at once, ``_both_fit``, counts them twice to be safe). A
        server's compute buffer barely grows with ``-c`` (flash attention on by default, one logits row:
        measured 21.3 MiB at ``-c 2048``, 27.3 MiB at 8192 for Gemma 3 270M, ``-lv 4``) and is left out.
        """
        if self._model is None:
            return 0  # the user's servers are already running: their memory is already taken
        n_ctx = self._sized(tokens) * self._parallel  # every slot holds the context (parallel=N: N slots)
        held = gguf_context(gguf_file_metadata(self._model))[1] * n_ctx * (1 if self._one_at_a_time else 2)
        if self._draft is not None:
            held += gguf_context(gguf_file_metadata(self._draft))[1] * n_ctx + self._draft.stat().st_size
        return int(held)

    def prepare_context(self, tokens: int) -> None:
        """Restart the managed servers with a ``-c`` that holds ``tokens`` (when ``ctx`` was not set)."""
        wanted = self._sized(tokens)
        if wanted != self._ctx:
            self._stop_all()
            self._ctx_before_growth, self._ctx = self._ctx, wanted
            self._started_since_growth = set()

    def _started_at_grown_context(self, speculative: bool) -> None:
        """A server started at the grown ``-c``: once both kinds have, a later failure is not the context's."""
        self._started_since_growth.add(speculative)
        if len(self._started_since_growth) == 2:
            self._ctx_before_growth = None

    def _no_grown_context(self, error: BackendUnavailable, speculative: bool) -> None:
        """A server that cannot start at a ``-c`` grown for a long context (its kind has not run at it yet):
        back to the ``-c`` before, every server stopped, and one line that says so."""
        if self._ctx_before_growth is None or speculative in self._started_since_growth:
            return
        grown, self._ctx = self._ctx, self._ctx_before_growth
        self._ctx_before_growth = None
        self._stop_all()  # the other arm's server may already run at the grown -c
        raise NotMeasurableHere(
            f"llama-server could not start with -c {grown} ({error}) — choose a shorter context; "
            f"the servers go back to -c {self._ctx}"
        )

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens``, from the plain server's ``/detokenize``."""
        answer = self._plain_service().post("/detokenize", {"tokens": tokens})
        return str(answer.get("content", ""))

    def logit_margin(self, prompt: str, prefix: Sequence[int], first: int, second: int) -> float | None:
        """``logit(first) - logit(second)`` on the plain server after ``prompt`` + ``prefix``.

        From the top log-probabilities the server returns (``n_probs``): a difference of
        log-probabilities is a difference of logits. ``None`` when either token is not
        among the top 20, or the server's format is not the current one.
        """
        service = self._plain_service()
        tokens = service.post("/tokenize", {"content": prompt, "add_special": True}).get("tokens")
        if not isinstance(tokens, list):
            return None
        body = {"prompt": [*tokens, *prefix], "n_predict": 1, "n_probs": 20, "temperature": 0.0, "top_k": 1}
        answer = service.post("/completion", {**body, "cache_prompt": False, "stream": False})
        try:
            top = answer["completion_probabilities"][0]["top_logprobs"]
            logprobs = {int(entry["id"]): float(entry["logprob"]) for entry in top}
        except (KeyError, IndexError, TypeError, ValueError):
            return None
        if first not in logprobs or second not in logprobs:
            return None
        return logprobs[first] - logprobs[second]
