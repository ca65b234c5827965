"""A comparison's design and what it observed, typed: read once from the ``scope`` a results file keeps.

``scope`` is stored as text (``{"max_tokens": "64", "looks": "16,32,64", ...}``) so that files written by
every release stay readable; :meth:`Design.of` reads it back once, and every reader takes the typed
value instead of parsing strings of its own. A value that does not parse is left ``None`` and named in
:attr:`Design.problems` (a hand-edited or hostile file), never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_MAX_TOKENS = 32  # results written before ``max_tokens`` was kept


@dataclass(frozen=True)
class Observed:
    """What the run read from the backend, not what it asked for."""

    lossless_check: str | None = None  # exact, same-seed or distribution (measure.sampled)
    n_ctx: str | None = None  # the context the backend held (llama.cpp sizes its caches by it)
    target_bytes: int | None = None  # the target's weights as loaded: what one plain token reads


@dataclass(frozen=True)
class Design:
    """How a comparison was planned: what its verdict is about and the rules its interval was read under.

    >>> design = Design.of({"max_tokens": "64", "looks": "16,32", "arm_order": "7", "target_bytes": "big"})
    >>> design.max_tokens, design.looks, design.observed.target_bytes, design.problems
    (64, (16, 32), None, ("scope 'target_bytes' is 'big', not a whole number",))
    """

    prompts: str = "instruction"  # the prompts' form: instruction, continuation for a base model, or given (a user's)
    prompt_set: str = ""  # the set's name: the category for the built-in prompts, else the user's set
    prompt_digest: str = ""  # SHA-256 of its texts (results written before it was kept: "")
    arm_options: str | None = None  # the backend options that change an arm, "k=v;k=v" (None: not kept then)
    profile: str = ""
    baseline: str = ""  # the arms' labels
    treatment: str = ""
    max_tokens: int = DEFAULT_MAX_TOKENS
    min_trials: int | None = None
    max_trials: int | None = None  # what the run could take: "more pairs would decide" is capped by it
    reading: str = "these-prompts"  # what the verdict is a statement about: these prompts, or prompts like these
    prompt_count: int | None = None
    looks: tuple[int, ...] | None = None  # the design's looks, in pairs: its critical values
    arm_order: str | None = None  # the seed of its coin-flipped arm order
    observed: Observed = Observed()
    problems: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def of(cls, scope: Mapping[str, str]) -> Design:
        """The design a ``scope`` keeps (absent values take their defaults; unreadable ones are named)."""
        problems: list[str] = []

        def number(name: str) -> int | None:
            text = scope.get(name)
            if not text:
                return None
            try:
                return int(text)
            except (TypeError, ValueError):
                problems.append(f"scope {name!r} is {text!r}, not a whole number")
                return None

        looks = None
        if scope.get("looks"):
            try:
                looks = tuple(int(n) for n in str(scope["looks"]).split(","))
            except ValueError:
                problems.append(f"scope 'looks' is {scope['looks']!r}, not pair counts separated by commas")
        return cls(
            prompts=scope.get("prompts") or "instruction",
            prompt_set=scope.get("prompt_set", ""),
            prompt_digest=scope.get("prompt_digest", ""),
            arm_options=scope.get("arm_options"),
            profile=scope.get("profile", ""),
            baseline=scope.get("baseline", ""),
            treatment=scope.get("treatment", ""),
            max_tokens=number("max_tokens") or DEFAULT_MAX_TOKENS,
            min_trials=number("min_trials"),
            max_trials=number("max_trials"),
            reading=scope.get("reading") or "these-prompts",
            prompt_count=number("prompt_count"),
            looks=looks,
            arm_order=scope.get("arm_order") or None,
            observed=Observed(scope.get("lossless_check") or None, scope.get("n_ctx") or None, number("target_bytes")),
            problems=tuple(problems),
        )
