"""The built-in prompt suite: four categories, our own text, fixed order, two styles.

- ``code``: write or continue short programs (predictable syntax, some freedom);
- ``copy``: rewrite or extract from a given text, so most of the answer is already
  in the prompt (prompt-lookup drafting should shine here);
- ``prose``: open-ended explanation in natural language;
- ``unpredictable``: answers with little structure to guess (random-looking lists).

Instruction-tuned models get instructions (:data:`SUITE`). A **base** model (one with
no chat template, such as the PyPI Gemma 3 270M) does not follow instructions, it
continues text, so it gets :data:`CONTINUATION_SUITE`: the same categories written as
text to continue — code to complete, a passage whose repetition has begun, prose to go
on with, a list of random words — with the same prompt ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_specdec.errors import SpecdecUsageError


@dataclass(frozen=True)
class Prompt:
    """One prompt of the suite."""

    id: str
    category: str
    text: str


_INVENTORY = """\
item,colour,count,shelf
bolt M6x20,zinc,480,A3
washer M6,zinc,1200,A3
hex nut M6,black,950,A4
wood screw 4x40,brass,310,B1
wall plug 6mm,grey,760,B2
hinge 60mm,steel,44,C7
"""

_FUNCTION = """\
def moving_average(values, window):
    if window <= 0:
        raise ValueError("window must be positive")
    result = []
    total = 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        if index >= window - 1:
            result.append(total / window)
    return result
"""

SUITE: tuple[Prompt, ...] = (
    Prompt(
        "code-1",
        "code",
        "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring and type hints.",
    ),
    Prompt(
        "code-2",
        "code",
        "Write a small Python class Stack with push, pop, peek and __len__, raising IndexError when empty.",
    ),
    Prompt(
        "code-3",
        "code",
        "Complete this function so it parses 'key=value' lines into a dict, skipping blank lines and comments:\n\ndef parse_settings(text: str) -> dict[str, str]:\n",
    ),
    Prompt(
        "code-4",
        "code",
        "Write a SQL query that lists each customer's name and the total of their orders in 2025, highest first.",
    ),
    Prompt("copy-1", "copy", "Repeat the following table exactly, but sort the rows by shelf:\n\n" + _INVENTORY),
    Prompt(
        "copy-2",
        "copy",
        "Rename the variable `total` to `running_sum` in this code and print the whole function again:\n\n" + _FUNCTION,
    ),
    Prompt("copy-3", "copy", "Extract every line that mentions zinc from this list, unchanged:\n\n" + _INVENTORY),
    Prompt(
        "copy-4", "copy", "Add a type hint to every parameter of this function and return it in full:\n\n" + _FUNCTION
    ),
    Prompt(
        "prose-1", "prose", "Explain to a new colleague why a bicycle stays upright when it moves, in two paragraphs."
    ),
    Prompt(
        "prose-2", "prose", "Describe a quiet harbour town in early spring, from the point of view of a ferry captain."
    ),
    Prompt(
        "prose-3",
        "prose",
        "Summarise the trade-offs between renting and buying a home for someone who moves every few years.",
    ),
    Prompt(
        "prose-4", "prose", "Write a short letter thanking a neighbour for looking after your plants during a trip."
    ),
    Prompt(
        "unpredictable-1",
        "unpredictable",
        "List forty unrelated English nouns, separated by commas, with no pattern or theme.",
    ),
    Prompt(
        "unpredictable-2", "unpredictable", "Write a sequence of thirty random four-digit numbers separated by spaces."
    ),
    Prompt(
        "unpredictable-3",
        "unpredictable",
        "Invent twenty-five made-up surnames from different imaginary languages, one per line.",
    ),
    Prompt(
        "unpredictable-4",
        "unpredictable",
        "Give a random mix of twenty colours, animals and cities, in no particular order.",
    ),
)

_PASSAGE = (
    "The lighthouse keeper climbs the spiral stairs at dusk, trims the wick, polishes the lens and "
    "writes the weather in the log before the first ship rounds the point."
)

CONTINUATION_SUITE: tuple[Prompt, ...] = (
    Prompt(
        "code-1",
        "code",
        'def fibonacci(n: int) -> int:\n    """Return the n-th Fibonacci number, iteratively."""\n    a, b = 0, 1\n',
    ),
    Prompt(
        "code-2",
        "code",
        "class Stack:\n    def __init__(self) -> None:\n        self._items: list[int] = []\n\n    def push(",
    ),
    Prompt(
        "code-3",
        "code",
        "def parse_settings(text: str) -> dict[str, str]:\n    settings = {}\n    for line in text.splitlines():\n",
    ),
    Prompt(
        "code-4", "code", "-- total of each customer's orders in 2025, highest first\nSELECT c.name, SUM(o.total) AS"
    ),
    Prompt("copy-1", "copy", "Inventory (original):\n" + _INVENTORY + "\nInventory (copy):\nitem,colour,count,shelf\n"),
    Prompt(
        "copy-2",
        "copy",
        "Original:\n" + _FUNCTION + "\nThe same function, copied:\ndef moving_average(values, window):\n",
    ),
    Prompt("copy-3", "copy", _PASSAGE + "\n\n" + _PASSAGE + "\n\n" + _PASSAGE.split(",", maxsplit=1)[0]),
    Prompt("copy-4", "copy", "bolt M6x20, washer M6, hex nut M6, wood screw, wall plug, hinge.\n" * 3 + "bolt M6x20,"),
    Prompt("prose-1", "prose", "A bicycle stays upright while it moves for two reasons. The first is"),
    Prompt("prose-2", "prose", "In early spring the harbour town wakes slowly. The ferry captain"),
    Prompt(
        "prose-3", "prose", "Renting and buying a home each have their costs. For someone who moves every few years,"
    ),
    Prompt("prose-4", "prose", "Dear neighbour,\n\nThank you so much for looking after my plants while I was away."),
    Prompt("unpredictable-1", "unpredictable", "quarry, violin, saddle, orbit, lantern, mango, chisel, tundra,"),
    Prompt("unpredictable-2", "unpredictable", "4821 0937 5512 7704 3168 9245 0081 6639"),
    Prompt("unpredictable-3", "unpredictable", "Okonkwo\nVaelstrom\nTiruvenkat\nHalloran\nMbeki-Sands\n"),
    Prompt("unpredictable-4", "unpredictable", "teal, Lisbon, heron, ochre, Quito, lynx, crimson,"),
)

CATEGORIES: tuple[str, ...] = ("code", "copy", "prose", "unpredictable")
STYLES: dict[str, tuple[Prompt, ...]] = {"instruction": SUITE, "continuation": CONTINUATION_SUITE}


def prompts_for(category: str, style: str = "instruction") -> tuple[Prompt, ...]:
    """The prompts of one category (``all`` for the whole suite) in ``style``."""
    suite = STYLES[style]
    if category == "all":
        return suite
    chosen = tuple(p for p in suite if p.category == category)
    if not chosen:
        raise SpecdecUsageError(f"unknown prompt category {category!r} — use one of: {', '.join(CATEGORIES)}, all")
    return chosen


_PROBE_PASSAGES = (
    "The ferry leaves the north pier at seven, crosses the bay in forty minutes and returns at nine.",
    "Keep the seedlings in shade for a week, then water them every second morning until they flower.",
    "The archive opens on weekdays from ten to four; bring an identity card and a pencil, not a pen.",
    "Each crate holds twelve jars of plum jam, packed in straw and sealed with a strip of brown tape.",
)


def probe_prompts() -> tuple[tuple[Prompt, Prompt], ...]:
    """Equal-length pairs for the engagement probe: (predictable, unpredictable).

    The first asks for a verbatim copy of a passage (a drafter can guess most of the
    answer); the second for random words unlike the same passage's words reversed
    (nothing to guess). Both prompts of a pair have the same number of characters.
    """
    pairs = []
    for index, passage in enumerate(_PROBE_PASSAGES):
        copy = f"Copy this sentence exactly, then copy it again:\n{passage}\n"
        scrambled = " ".join(reversed(passage.rstrip(".").split())) + "."
        shuffle = f"Write unrelated random words, not these ones:\n{scrambled}\n"
        shuffle = shuffle[: len(copy)].ljust(len(copy))
        pairs.append((Prompt(f"probe-copy-{index}", "probe", copy), Prompt(f"probe-random-{index}", "probe", shuffle)))
    return tuple(pairs)
