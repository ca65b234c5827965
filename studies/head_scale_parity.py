"""Greedy decoding of the embedded target with its output head at ×4 (the default) against ×1.

Run: ``python -m studies.head_scale_parity`` (``--prompts 12 --tokens 32``). Not collected
by pytest.

``SyntheticSpec.head_scale`` multiplies the output head's weights by a power of two, so
every logit scales exactly and the greedy choice (the largest logit) should not move. Both
targets are built into a temporary folder (the ×1 one by overriding the spec for the
build only) and decoded greedily with each library's own loop: mlx-lm's
``generate_step`` (its default sampler is the argmax) and llama-cpp-python's
``generate(temp=0)``. Where the two disagree the first differing step is
shown with the ×1 model's top-two logit margin there and the logits' dtype: mlx-lm takes
the argmax of float16 log-probabilities, so near ties can resolve differently once scaled.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from unittest import mock

from pytest_specdec.embedded import gguf_writer, models
from pytest_specdec.embedded.prompts import SUITE, Prompt

Decode = Callable[[str], list[int]]


@contextmanager
def head_at(scale: float) -> Iterator[None]:
    """The embedded target's spec with its head at ``scale``, for building only."""
    spec = models.EMBEDDED_MODELS["target"]
    with mock.patch.dict(models.EMBEDDED_MODELS, {"target": replace(spec, head_scale=scale)}):
        yield


def mlx_decoder(folder: Path, tokens: int) -> tuple[Decode, Callable[[str, list[int]], str]]:
    """Greedy ids from mlx-lm, and a description of the step after a prefix (margin and dtype)."""
    import mlx.core as mx
    import numpy as np
    from mlx_lm import load
    from mlx_lm.generate import generate_step

    model, tokenizer = load(str(folder))

    def decode(text: str) -> list[int]:
        steps = generate_step(mx.array(tokenizer.encode(text)), model, max_tokens=tokens)
        return [int(token) for token, _ in steps]

    def margin(text: str, prefix: list[int]) -> str:
        logits = model(mx.array([tokenizer.encode(text) + prefix]))[0, -1]
        best = np.sort(np.array(logits.astype(mx.float32)))[-2:]
        return f"top-two margin {best[1] - best[0]:.4f} ({logits.dtype})"

    return decode, margin


def llama_decoder(path: Path, tokens: int) -> Decode:
    """Greedy ids from llama-cpp-python's token loop (``generate`` at temperature 0 takes the argmax)."""
    from itertools import islice

    from llama_cpp import Llama

    llm = Llama(str(path), n_ctx=512, verbose=False)

    def decode(text: str) -> list[int]:
        steps = llm.generate(llm.tokenize(text.encode(), add_bos=True), temp=0.0, reset=True)
        return [int(token) for token in islice(steps, tokens)]

    return decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=12, help="the first N prompts of the suite")
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    prompts = SUITE[: args.prompts]
    with tempfile.TemporaryDirectory(prefix="head-scale-") as folder:
        rows = compare(Path(folder), prompts, args.tokens)
    print(f"greedy, {args.tokens} tokens, the first {len(prompts)} suite prompts, head ×4 against ×1")
    print("| library | same tokens | where they parted |")
    print("|---|---|---|")
    print("\n".join(rows))


def compare(root: Path, prompts: Sequence[Prompt], tokens: int) -> list[str]:
    """One table row per library: prompts whose greedy tokens agree, and where the others parted."""
    built: dict[float, tuple[Path, Path]] = {}
    for scale in (4.0, 1.0):
        with head_at(scale):
            built[scale] = (
                models.materialize("embedded:target", root / f"x{scale:g}"),
                gguf_writer.materialize_gguf("embedded:target", root / f"x{scale:g}"),
            )
    (scaled, scaled_margin), (plain, plain_margin) = (mlx_decoder(built[s][0], tokens) for s in (4.0, 1.0))
    rows = []
    for library, pair in (
        ("mlx-lm", (scaled, plain)),
        ("llama.cpp", tuple(llama_decoder(built[s][1], tokens) for s in (4.0, 1.0))),
    ):
        same, notes = 0, []
        for prompt in prompts:
            four, one = pair[0](prompt.text), pair[1](prompt.text)
            if four == one:
                same += 1
                continue
            step = next(
                (i for i, (a, b) in enumerate(zip(four, one, strict=False)) if a != b), min(len(four), len(one))
            )
            note = f"{prompt.id}: parted at step {step}"
            if library == "mlx-lm":
                note += f", ×1 {plain_margin(prompt.text, one[:step])}, ×4 {scaled_margin(prompt.text, four[:step])}"
            notes.append(note)
        rows.append(f"| {library} | {same}/{len(prompts)} | {'; '.join(notes) or '-'} |")
    return rows


if __name__ == "__main__":
    main()
