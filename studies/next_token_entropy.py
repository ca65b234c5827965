"""How concentrated a model's next-token distribution is when sampling: the embedded target against Gemma.

Run: ``python -m studies.next_token_entropy`` (``--temperature 0.7 --tokens 32``). Not collected by pytest.

For each ``code`` prompt of the suite (the instruction style the embedded pair runs, and for
Gemma, a base model, the continuation style too), 32 tokens are sampled at the temperature
from the model's own logits (numpy, seed 0); at each step the entropy of the tempered
distribution and the probability of its most likely token are kept. The embedded target is
measured with its head at scales 1, 2, 4 and 8 (its logits times the scale: what
``SyntheticSpec.head_scale`` writes into the weights), Gemma 3 270M Q4_K_M on llama-cpp-python.
How far a temperature change moves a model's draws, and so how often the distribution check
catches it, depends on this entropy.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from pytest_specdec.embedded.prompts import prompts_for

Logits = Callable[[list[int]], npt.NDArray[np.float64]]


def tempered(logits: npt.NDArray[np.float64], temperature: float) -> npt.NDArray[np.float64]:
    """The sampling distribution of ``logits`` at ``temperature``."""
    scaled = logits / temperature
    weights = np.exp(scaled - np.max(scaled))
    return np.asarray(weights / weights.sum(), dtype=np.float64)


def walk(next_logits: Logits, prompts: Sequence[list[int]], temperature: float, tokens: int) -> tuple[float, float]:
    """Mean entropy (nats) and median top-token probability over ``tokens`` sampled steps per prompt."""
    entropies, tops = [], []
    for prompt in prompts:
        ids, rng = list(prompt), np.random.default_rng(0)
        for _ in range(tokens):
            p = tempered(next_logits(ids), temperature)
            entropies.append(float(-(p * np.log(p + 1e-30)).sum()))
            tops.append(float(np.max(p)))
            ids.append(int(rng.choice(len(p), p=p)))
    return float(np.mean(entropies)), float(np.median(tops))


def embedded_rows(temperature: float, tokens: int) -> list[str]:
    import mlx.core as mx
    from mlx_lm import load

    from pytest_specdec.embedded.models import DEFAULT_TARGET, embedded_spec, materialize

    model, tokenizer = load(str(materialize(DEFAULT_TARGET)))
    written = embedded_spec(DEFAULT_TARGET).head_scale
    prompts = [tokenizer.encode(p.text) for p in prompts_for("code", "instruction")]
    rows = []
    for scale in (1.0, 2.0, 4.0, 8.0):

        def next_logits(ids: list[int], factor: float = scale / written) -> npt.NDArray[np.float64]:
            logits = model(mx.array([ids]))[0, -1].astype(mx.float32)
            return np.array(logits, dtype=np.float64) * factor

        entropy, top = walk(next_logits, prompts, temperature, tokens)
        rows.append(f"| embedded target, head ×{scale:g} | instruction | {entropy:.2f} | {top:.2f} |")
    return rows


def gemma_rows(temperature: float, tokens: int) -> list[str]:
    from llama_cpp import Llama

    from pytest_specdec.backends.files import resolve_gguf
    from pytest_specdec.embedded.packaged import GEMMA_GGUF

    llm = Llama(str(resolve_gguf(GEMMA_GGUF)), n_ctx=1024, logits_all=True, verbose=False)

    def next_logits(ids: list[int]) -> npt.NDArray[np.float64]:
        if list(llm.input_ids[: llm.n_tokens]) != ids[: llm.n_tokens]:  # a new prompt: evaluate it whole
            llm.reset()
        llm.eval(ids[llm.n_tokens :])
        return np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)

    rows = []
    for style in ("instruction", "continuation"):
        prompts = [llm.tokenize(p.text.encode(), add_bos=True) for p in prompts_for("code", style)]
        entropy, top = walk(next_logits, prompts, temperature, tokens)
        rows.append(f"| Gemma 3 270M Q4_K_M | {style} | {entropy:.2f} | {top:.2f} |")
    llm.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    print(f"T = {args.temperature:g}, {args.tokens} sampled tokens on each of the 4 code prompts")
    print("| model | prompts | mean entropy (nats) | median top-token probability |")
    print("|---|---|---|---|")
    print("\n".join([*embedded_rows(args.temperature, args.tokens), *gemma_rows(args.temperature, args.tokens)]))


if __name__ == "__main__":
    main()
