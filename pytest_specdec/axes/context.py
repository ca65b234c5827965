"""Tokens of context before every prompt: ``compare(context=8192)``, ``sweep(context=[0, 2048, 8192])``.

A comparison at context *N* puts *N* tokens of the suite's own text before each prompt
(:mod:`pytest_specdec.measure.context` builds and sizes the prefix with the backend's tokenizer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_specdec.axes import Axis, whole_number
from pytest_specdec.errors import SpecdecUsageError

MAX_CONTEXT = 1 << 24  # 16M tokens: more than any model's window; a larger number is a typo


def context_label(tokens: int) -> str:
    """``ctx=8K`` for 8192 tokens of context, ``ctx=1000`` where it is not a whole number of K."""
    return f"ctx={tokens // 1024}K" if tokens and tokens % 1024 == 0 else f"ctx={tokens}"


class ContextAxis(Axis[int]):
    """The prefix length, in the target's tokens."""

    name = keyword = "context"
    title = "context"
    order = 30
    axis_label = "tokens of context before each prompt"
    default = 0
    plot_scale = "symlog"
    tells_prompt_tokens = True

    def parse(self, value: object) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise SpecdecUsageError(f"context={value} is negative — give the prefix length in tokens, 0 for none")
        return whole_number("context", value, low=0, high=MAX_CONTEXT)

    def example(self) -> object:
        return 2048

    def label(self, value: int) -> str:
        return context_label(value)

    def statement(self, value: int) -> str:
        return f", behind {value} tokens of context"

    def legacy(self, comparison: Mapping[str, Any]) -> int | None:
        said = (comparison.get("scope") or {}).get("context")
        return int(said) if isinstance(said, str) and said.isdigit() else None


AXIS = CONTEXT = ContextAxis()
