"""The simulated backend's sampled text: a first-order Markov chain with a language model's spread.

Every token's next-token logits are a fixed row of a seeded Gaussian matrix, scaled so
that at temperature 0.7 the most likely token takes about 0.7 of the mass on average
(a peaked, code-like distribution, not the near-uniform one of an untrained model).
A continuation starts from a token fixed by the prompt and draws each next token at the
request's temperature and top-p with a generator seeded by the request's seed.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np
import numpy.typing as npt

VOCAB = 1000
LOGIT_SCALE = 4.0  # the logits' spread: top-token mass ~0.7 at T=0.7


@functools.cache
def _logits() -> npt.NDArray[np.float64]:
    return np.random.default_rng(20261201).standard_normal((VOCAB, VOCAB)) * LOGIT_SCALE


def _start(prompt: str) -> int:
    return int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "little") % VOCAB


def _next_token(rng: np.random.Generator, previous: int, temperature: float, top_p: float) -> int:
    scaled = _logits()[previous] / temperature
    weights = np.exp(scaled - np.max(scaled))
    weights /= weights.sum()
    if top_p < 1.0:
        order = np.argsort(-weights)
        keep = order[: int(np.searchsorted(np.cumsum(weights[order]), top_p)) + 1]
        trimmed = np.zeros_like(weights)
        trimmed[keep] = weights[keep]
        weights = trimmed / trimmed.sum()
    return int(rng.choice(VOCAB, p=weights))


def sampled_tokens(prompt: str, count: int, seed: int, temperature: float, top_p: float) -> list[int]:
    """``count`` tokens drawn after ``prompt`` with ``seed`` at ``temperature`` and ``top_p``."""
    rng = np.random.default_rng(seed)
    tokens, previous = [], _start(prompt)
    for _ in range(count):
        previous = _next_token(rng, previous, temperature, top_p)
        tokens.append(previous)
    return tokens
