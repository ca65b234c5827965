"""``mlx_lm.server`` as a user starts it, with what each request did written to its log.

``python -m pytest_specdec.backends.mlx_server.launcher --model M [--draft-model D] ...`` takes
``mlx_lm.server``'s own flags and runs its own ``main()`` (mlx-lm 0.32: ``mlx_lm/server.py``), after
wrapping two things it calls, so the counts are observed inside the server:

* ``mlx_lm.server.stream_generate`` — the single-request path (``ResponseGenerator._serve_single``;
  the server bound the name at import, so the module attribute is what it calls). The wrapper counts
  the draft model's forward calls (``CountedModel``: one per proposed token) and the responses whose
  ``from_draft`` is true, and writes one line when the generation ends.
* ``BatchGenerator.insert_segments`` — the batched path, which never speculates (the server batches
  only without a draft model and without a request ``seed``: ``_is_batchable``, ``is_batchable``).

Each line is ``specdec-mlx-server {"path": ..., "drafted": ..., "accepted": ..., "tokens": ...}``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from pytest_specdec.backends.mlx_lm_parts import CountedModel

PREFIX = "specdec-mlx-server "


def said(path: str, drafted: int, accepted: int, tokens: int) -> None:
    """One request's line, flushed at once (the adapter reads the log after each request)."""
    line = json.dumps({"path": path, "drafted": drafted, "accepted": accepted, "tokens": tokens})
    print(PREFIX + line, flush=True)


def wrap(server: Any, generate: Any) -> None:
    """Count what the server's two generation paths do (``server``: the ``mlx_lm.server`` module)."""
    original = server.stream_generate

    def counted(
        model: Any, tokenizer: Any, prompt: Any, *args: Any, draft_model: Any = None, **kwargs: Any
    ) -> Iterator[Any]:
        target = CountedModel(model)
        draft = CountedModel(draft_model, after=target) if draft_model is not None else None
        accepted = tokens = 0
        try:
            for response in original(target, tokenizer, prompt, *args, draft_model=draft, **kwargs):
                tokens += 1
                accepted += bool(getattr(response, "from_draft", False))
                yield response
        finally:
            said("single", draft.counted if draft is not None else 0, accepted, tokens)

    server.stream_generate = counted
    batcher = generate.BatchGenerator
    insert = batcher.insert_segments

    def inserted(self: Any, segments: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        for _ in segments:
            said("batched", 0, 0, 0)
        return insert(self, segments, *args, **kwargs)

    batcher.insert_segments = inserted


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mlx_lm.server`` with ``argv`` as its command line."""
    import importlib

    # by module name: "from mlx_lm import generate" is the function mlx_lm's package exports under that name
    generate, server = importlib.import_module("mlx_lm.generate"), importlib.import_module("mlx_lm.server")
    wrap(server, generate)
    sys.argv = ["mlx_lm.server", *(sys.argv[1:] if argv is None else argv)]
    server.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
