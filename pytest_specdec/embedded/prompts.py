"""The built-in prompt suite: seven content classes, our own text, fixed order, two styles.

- ``code``: write or continue short programs (predictable syntax, some freedom);
- ``copy``: rewrite or extract from a given text, so most of the answer is already
  in the prompt (prompt-lookup drafting should shine here);
- ``prose``: open-ended explanation in natural language;
- ``unpredictable``: answers with little structure to guess (random-looking lists);
- ``creative``: stories and verse, where published Mac figures put SD below plain decoding;
- ``tool-call``: a function call as JSON (a fixed schema around a few free values);
- ``chat``: the next turn of a multi-turn conversation (chat messages: the engine's chat template makes the
  text the model reads; a model without one reads the conversation's transcript).

Instruction-tuned models get instructions (:data:`SUITE`). A **base** model (one with
no chat template, such as the PyPI Gemma 3 270M) does not follow instructions, it
continues text, so it gets :data:`CONTINUATION_SUITE`: the same categories written as
text to continue — code to complete, a passage whose repetition has begun, prose to go
on with, a list of random words — with the same prompt ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pytest_specdec.errors import SpecdecUsageError


class ChatMessage(NamedTuple):
    """One message of a chat prompt: ``ChatMessage("user", "Summarise this ticket.")``."""

    role: str
    content: str


def transcript(messages: Sequence[ChatMessage]) -> str:
    """A conversation as plain text, for a model without a chat template (and as a chat set's text until rendered).

    Example::

        >>> transcript([ChatMessage("user", "Hi."), ChatMessage("assistant", "Hello."), ChatMessage("user", "Bye.")])
        'User: Hi.\\n\\nAssistant: Hello.\\n\\nUser: Bye.\\n\\nAssistant:'
    """
    return "".join(f"{m.role.capitalize()}: {m.content}\n\n" for m in messages) + "Assistant:"


@dataclass(frozen=True)
class Prompt:
    """One prompt of the suite; a chat prompt also has its ``messages`` (``text`` is then what the model reads:
    the engine's chat template applied to them, or their :func:`transcript` before that)."""

    id: str
    category: str
    text: str
    messages: tuple[ChatMessage, ...] = ()


def chat_prompt(id_: str, category: str, *turns: tuple[str, str]) -> Prompt:
    """A chat prompt of ``(role, content)`` turns, its text their transcript until an engine renders them."""
    messages = tuple(ChatMessage(role, content) for role, content in turns)
    return Prompt(id_, category, transcript(messages), messages)


_CHATS: tuple[tuple[tuple[str, str], ...], ...] = (
    (
        ("system", "You are a concise assistant for a bicycle repair shop."),
        ("user", "My chain keeps slipping on the smallest rear cog. What should I check?"),
        ("assistant", "Check the chain for wear, then the rear derailleur's limit screw and cable tension."),
        ("user", "The chain is new. How do I adjust the cable tension, step by step?"),
    ),
    (
        ("user", "I'm planning a three-day trip to Lisbon in March. Is that a good month?"),
        ("assistant", "Yes: mild, around 17 °C by day, some rain, and fewer visitors than in summer."),
        ("user", "Suggest a plan for the first day, starting in the Baixa."),
    ),
    (
        ("system", "You help developers review Python code."),
        ("user", "Is `for i in range(len(items)): print(items[i])` fine?"),
        ("assistant", "It works, but iterating directly is clearer: `for item in items: print(item)`."),
        ("user", "And if I need the index as well?"),
    ),
    (
        ("user", "Translate 'the train leaves at seven' into French."),
        ("assistant", "Le train part à sept heures."),
        ("user", "Now into Spanish and German, one line each."),
    ),
)


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
    Prompt("creative-1", "creative", "Write a short poem about a lighthouse in a storm, with an unexpected last line."),
    Prompt(
        "creative-2", "creative", "Tell a fable about a fox who learns to count, ending with a moral nobody expects."
    ),
    Prompt(
        "creative-3", "creative", "Write the opening paragraph of a mystery set on a night train through the mountains."
    ),
    Prompt(
        "creative-4", "creative", "Describe a dream in which the furniture of a house argues about who is most useful."
    ),
    Prompt(
        "tool-call-1",
        "tool-call",
        'Tools: get_weather(city: str, unit: "C" | "F"). Answer only with the JSON call for: the weather in Lisbon in '
        "Celsius.",
    ),
    Prompt(
        "tool-call-2",
        "tool-call",
        'Answer only with a JSON object {"name": ..., "arguments": {...}} calling search_orders with customer_id 4821, '
        'status "shipped" and limit 20.',
    ),
    Prompt(
        "tool-call-3",
        "tool-call",
        "Answer only with the JSON call of create_event(title, start, end, attendees) for a design review with Ana "
        "and Kofi next Tuesday from 10:00 to 11:00 (ISO 8601 times).",
    ),
    Prompt(
        "tool-call-4",
        "tool-call",
        "Answer only with a JSON array of two tool calls: add_item with sku M6-20 and qty 480, then add_item with sku "
        "W-M6 and qty 1200.",
    ),
    *(chat_prompt(f"chat-{index}", "chat", *turns) for index, turns in enumerate(_CHATS, 1)),
)

_PASSAGE = (
    "The lighthouse keeper climbs the spiral stairs at dusk, trims the wick, polishes the lens and "
    "writes the weather in the log before the first ship rounds the point."
)

_CALLS = (
    '{"name": "get_weather", "arguments": {"city": "Quito", "unit": "C"}}\n'
    '{"name": "search_orders", "arguments": {"customer_id": 1093, "status": "open", "limit": 5}}\n'
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
    Prompt("creative-1", "creative", "The storm found the lighthouse at midnight, and the keeper, who had never"),
    Prompt("creative-2", "creative", "Once there was a fox who wanted to count the stars. Every night she"),
    Prompt("creative-3", "creative", "The night train climbed into the mountains, and in compartment seven a woman"),
    Prompt("creative-4", "creative", "In the dream, the armchair spoke first. 'Without me,' it said,"),
    Prompt("tool-call-1", "tool-call", _CALLS + '{"name": "get_weather", "arguments": {"city": "Lisbon", "unit": '),
    Prompt("tool-call-2", "tool-call", _CALLS + '{"name": "search_orders", "arguments": {"customer_id": 4821, '),
    Prompt("tool-call-3", "tool-call", _CALLS + '{"name": "create_event", "arguments": {"title": "Design review", '),
    Prompt("tool-call-4", "tool-call", _CALLS + '{"name": "add_item", "arguments": {"sku": "M6-20", "qty": 480}}\n{'),
    # A base model has no chat template: it continues the conversation's transcript.
    *(Prompt(f"chat-{i}", "chat", transcript([ChatMessage(*t) for t in turns])) for i, turns in enumerate(_CHATS, 1)),
)

CATEGORIES: tuple[str, ...] = ("code", "copy", "prose", "unpredictable", "creative", "tool-call", "chat")
# The classes the embedded models' tokenizer is trained on and a context prefix is cut from: the suite as it was
# before creative, tool-call and chat, so the synthetic models (and their digests, in every key) and prefixes stay the same.
FIRST_CATEGORIES = CATEGORIES[:4]
STYLES: dict[str, tuple[Prompt, ...]] = {"instruction": SUITE, "continuation": CONTINUATION_SUITE}


def prompts_for(category: str, style: str = "instruction") -> tuple[Prompt, ...]:
    """The prompts of one category (``all``: every class but ``chat``) in ``style``."""
    suite = STYLES[style]
    if category == "all":  # every class that is text: a conversation goes through each engine's template apart
        return tuple(p for p in suite if p.category != "chat")
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
