"""What the mlx and mlx-server backends share: forward calls counted as mlx-lm makes them (the observed draft
count), and a model reference resolved to what mlx-lm loads.

mlx-lm's ``speculative_generate_step`` calls the draft model object once per proposed token (after the
target's first call: the draft's own prompt prefill comes before it), so counting the object's calls is
observing drafting, not rebuilding it from γ: a release that never calls the draft reads 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_specdec.backends.files import looks_like_path
from pytest_specdec.embedded import models
from pytest_specdec.errors import ModelLoadError


class CountedModel:
    """A model whose forward calls are counted as mlx-lm makes them (it calls the model object itself).

    ``after``: count only the calls made once that model (the target) has been called — the draft's
    prompt prefill comes before the target's in mlx-lm, so what is counted then are the draft's
    proposals. Every other attribute is the model's own (mlx-lm reads ``layers``, ``make_cache`` …).
    """

    def __init__(self, model: Any, after: CountedModel | None = None) -> None:
        self._model = model
        self._after = after
        self.calls = 0  # every forward call
        self.counted = 0  # the calls made once ``after`` had been called

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self._after is None or self._after.calls:
            self.counted += 1
        return self._model(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def resolve_reference(reference: str) -> str:
    """An embedded model or the packaged Gemma as a local folder, a path checked, else a Hugging Face repo."""
    from pytest_specdec.embedded import gemma_mlx

    if reference.startswith(gemma_mlx.REFERENCE):
        # The llama-cpp backend's Gemma GGUF, converted for mlx-lm so both backends run one model.
        return str(gemma_mlx.resolve(reference))
    if models.is_embedded(reference):
        try:
            return str(models.materialize(reference))
        except models.UnknownEmbeddedModel as error:
            raise ModelLoadError(f"{error} — fix --specdec-model / --specdec-draft") from None
    if looks_like_path(reference):
        path = Path(reference).expanduser()
        if not path.exists():
            raise ModelLoadError(f"model path {reference} does not exist — fix --specdec-model / --specdec-draft")
        return str(path)
    return reference
