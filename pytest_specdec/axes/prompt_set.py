"""The user's prompt set a comparison measured: ``compare(prompts=[...])`` or a set of the prompt file.

Its value is the set's name and the start of its digest, ``support-replies#1a2b3c4d5e6f``
(:mod:`pytest_specdec.embedded.prompt_sets` makes it). A comparison on the built-in prompts of its
category has none, so its key is the one it always had; a user's set is in the key, and an edited set
is a new key. ``compare`` takes the texts as ``prompts=`` and resolves them itself: this axis has no
keyword of its own and is not swept.
"""

from __future__ import annotations

import re

from pytest_specdec.axes import Axis
from pytest_specdec.errors import SpecdecUsageError

SET_LABEL = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]{0,63})#([0-9a-f]{12})")


class PromptSetAxis(Axis[str | None]):
    """Which of the user's prompt sets, by name and digest."""

    name = keyword = "prompt_set"
    title = "prompt set"
    order = 5
    default = None  # the category's built-in prompts

    @property
    def keywords(self) -> tuple[str, ...]:
        return ()  # compare(prompts=...) is resolved by the session, against the prompt file

    def parse(self, value: object) -> str:
        if not isinstance(value, str) or not SET_LABEL.fullmatch(value):
            raise SpecdecUsageError(
                f"prompt_set={value!r} is not NAME#DIGEST (12 hex digits) — a stored file was edited"
            )
        return value

    def example(self) -> object:
        return "support-replies#1a2b3c4d5e6f"

    def label(self, value: str | None) -> str:
        return f"prompts={value}"

    def row_label(self, value: str | None) -> str:
        """``support prompts`` (the digest is the key's)."""
        return f"{_name(value)} prompts"

    def statement(self, value: str | None) -> str:
        return f", on the prompt set {_name(value)}"

    def position(self, value: str | None) -> float:
        raise SpecdecUsageError("prompt sets are not swept — compare each set in a test of its own")


def _name(value: str | None) -> str:
    found = SET_LABEL.fullmatch(value or "")
    return found.group(1) if found else str(value)


AXIS = PROMPT_SET = PromptSetAxis()
