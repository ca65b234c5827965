"""A user's own prompts: named sets in a prompt file, or texts given to ``compare(prompts=...)``.

The built-in suite (:mod:`pytest_specdec.embedded.prompts`) answers for our prompts; a user's answer is
for their traffic. A **prompt set** is a name, the content class it stands for (``code``, ``prose``,
``tool-call`` … or ``custom``) and its texts; its **digest** (SHA-256 of the texts, in order) is part of
the baseline key, so an edited set is a new key, never "unchanged" against a baseline of other prompts.
The texts themselves stay on the machine: records, submissions and the site keep the name and digest.

A prompt file (``[tool.specdec] prompts = "sd-prompts.toml"`` or ``--specdec-prompts``) is TOML::

    [sets.support-replies]
    content = "prose"
    prompts = ["Reply to a customer whose parcel is late ...", "..."]

or JSON Lines, one prompt a line: ``{"set": "support-replies", "content": "prose", "text": "..."}``.
A prompt may be a conversation instead of a text: a list of chat messages (TOML
``[{role = "user", content = "..."}]``, JSON Lines ``"messages": [...]``, ``compare(prompts=[[{...}]])``).
The engine's own chat template turns them into the text the model reads (:func:`as_read`), so a
chat set's digest in the key covers the messages and the template; a backend or model without a
chat template refuses such a set in one line, before measuring.

Example::

    >>> chosen = inline_set(["def add(a, b):", "class Stack:"], "code")
    >>> chosen.name, chosen.content, [p.id for p in chosen.prompts], chosen.label == f"inline#{chosen.digest[:12]}"
    ('inline', 'code', ['inline-1', 'inline-2'], True)
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_specdec.embedded.prompts import CATEGORIES, ChatMessage, Prompt, transcript
from pytest_specdec.errors import SpecdecUsageError, TemplateRefused

CUSTOM = "custom"  # the content class of texts given without one
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
ROLES = ("system", "developer", "user", "assistant", "tool")
ChatRenderer = Callable[[Sequence[ChatMessage]], "str | None"]  # the engine's chat template; None: it has none


def digest_of(prompts: Sequence[Prompt]) -> str:
    """SHA-256 of the texts in order (a chat prompt's with its messages): what a result measured, whatever the set
    is called."""
    parts = [[p.text, [list(m) for m in p.messages]] if p.messages else p.text for p in prompts]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PromptSet:
    """A named set of the user's prompts and the content class it stands for."""

    name: str
    content: str
    prompts: tuple[Prompt, ...]

    @property
    def digest(self) -> str:
        """SHA-256 of the texts (:func:`digest_of`)."""
        return digest_of(self.prompts)

    @property
    def label(self) -> str:
        """``support-replies#1a2b3c4d5e6f``: the set in a baseline key."""
        return f"{self.name}#{self.digest[:12]}"


def _plain(name: object, what: str, where: str) -> str:
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        raise SpecdecUsageError(
            f"{where}: {what} {name!r} is not a plain name — use letters, digits, '-', '_' or '.' (at most 64)"
        )
    return name


def _messages(given: Sequence[object], what: str) -> tuple[ChatMessage, ...]:
    """A conversation's messages, each ``{"role": ROLE, "content": TEXT}``, the last one not the assistant's."""
    found = []
    for number, message in enumerate(given, 1):
        if (
            not isinstance(message, Mapping)
            or set(message) != {"role", "content"}
            or message["role"] not in ROLES
            or not isinstance(message["content"], str)
            or not message["content"].strip()
        ):
            raise SpecdecUsageError(
                f"{what}: message {number} is {message!r} — give each message as {{role = ROLE, content = TEXT}} "
                f"with a role of {', '.join(ROLES)} and a non-empty text"
            )
        found.append(ChatMessage(message["role"], message["content"]))
    if not found or found[-1].role == "assistant":
        raise SpecdecUsageError(f"{what}: a conversation needs messages and ends on a turn the model answers, not "
                                "on the assistant's (the engine adds the assistant's turn)")  # fmt: skip
    return tuple(found)


def _texts(name: str, content: str, texts: object, where: str) -> tuple[Prompt, ...]:
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise SpecdecUsageError(f'{where}: set {name!r} needs a non-empty list of prompt texts, e.g. prompts = ["..."]')
    prompts = []
    for index, text in enumerate(texts, 1):
        if isinstance(text, Sequence) and not isinstance(text, str):
            messages = _messages(text, f"{where}: prompt {index} of set {name!r}")
            prompts.append(Prompt(f"{name}-{index}", content, transcript(messages), messages))
        elif not isinstance(text, str) or not text.strip():
            raise SpecdecUsageError(
                f"{where}: prompt {index} of set {name!r} is {text!r}, not a non-empty text or a list of chat "
                "messages — give each prompt as the text the model reads, or as [{role, content}, ...]"
            )
        else:
            prompts.append(Prompt(f"{name}-{index}", content, text))
    return tuple(prompts)


def as_read(prompts: Sequence[Prompt], render: ChatRenderer | None, *, yours: bool, reader: str) -> tuple[Prompt, ...]:
    """The prompts as the model reads them: each chat prompt's messages through the engine's chat template.

    Where there is none (``render`` is ``None`` or answers ``None``), a built-in chat prompt is read as its
    transcript, and a chat prompt of yours is refused in one line naming ``reader`` (the backend and model).

    Example::

        >>> chat = Prompt("c-1", "chat", "User: Hi.\\n\\nAssistant:", (ChatMessage("user", "Hi."),))
        >>> [p.text for p in as_read([chat], lambda ms: f"<u>{ms[0].content}</u><a>", yours=True, reader="x")]
        ['<u>Hi.</u><a>']
        >>> [p.text for p in as_read([chat], None, yours=False, reader="x")]
        ['User: Hi.\\n\\nAssistant:']
    """
    read = []
    for prompt in prompts:
        if not prompt.messages or render is None:
            text = None
        else:  # yours as you wrote them (a refusal is yours to see); ours as the template allows
            text = render(prompt.messages) if yours else _rendered_as_the_template_allows(prompt.messages, render)
        if text is not None:
            read.append(Prompt(prompt.id, prompt.category, text, prompt.messages))
        elif prompt.messages and yours:
            raise SpecdecUsageError(
                f"prompt {prompt.id} is a list of chat messages, but {reader} has no chat template to turn them into "
                "text (a base model, a backend that reads text only, or an A/B of two runtimes) — give it as text"
            )
        else:
            read.append(Prompt(prompt.id, prompt.category, prompt.text) if prompt.messages else prompt)
    return tuple(read)


def inline_set(texts: object, content: str | None) -> PromptSet:
    """The texts given to ``compare(prompts=[...])`` as the set ``inline`` of ``content`` (``custom``)."""
    where = "compare(prompts=...)"
    content = _plain(content or CUSTOM, "the content class", where)
    return PromptSet("inline", content, _texts("inline", content, texts, where))


def _rendered_as_the_template_allows(messages: Sequence[ChatMessage], render: ChatRenderer) -> str | None:
    """A built-in conversation through a template that refuses a system turn (Gemma's, older Mistral's): the system
    text joins the first user turn, as those models' cards advise; a template that refuses that too: ``None``."""
    try:
        return render(messages)
    except TemplateRefused:
        if messages[0].role != "system" or len(messages) < 2:
            return None
    system, first, *rest = messages
    try:
        return render([ChatMessage(first.role, f"{system.content}\n\n{first.content}"), *rest])
    except TemplateRefused:
        return None


def read_prompt_file(path: Path, flag: str) -> dict[str, PromptSet]:
    """The named sets of a TOML or JSON Lines prompt file; a problem is one line naming the file and the fix."""
    where = f"prompt file {path} ({flag})"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecdecUsageError(f"{where} does not exist — create it or correct the path") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecdecUsageError(f"{where} cannot be read ({error}) — give a UTF-8 text file") from None
    if path.suffix == ".jsonl":
        return _read_jsonl(text, where)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecdecUsageError(f"{where} is not TOML: {error} — or name a .jsonl file for JSON Lines") from None
    sets = data.get("sets")
    if not isinstance(sets, dict) or not sets or set(data) != {"sets"}:
        raise SpecdecUsageError(f"{where} holds no [sets.NAME] tables (with content = ... and prompts = [...])")
    found = {}
    for name, table in sets.items():
        _plain(name, "the set name", where)
        if not isinstance(table, dict) or set(table) - {"content", "prompts"}:
            raise SpecdecUsageError(f'{where}: [sets.{name}] takes content = "CLASS" and prompts = [...] only')
        content = _plain(table.get("content", CUSTOM), "the content class", where)
        found[name] = PromptSet(name, content, _texts(name, content, table.get("prompts"), where))
    return found


def _read_jsonl(text: str, where: str) -> dict[str, PromptSet]:
    texts: dict[str, list[object]] = {}
    contents: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise SpecdecUsageError(f"{where} line {number} is not JSON ({error.msg})") from None
        if (
            not isinstance(row, dict)
            or set(row) - {"set", "content", "text", "messages"}
            or "set" not in row
            or (("text" in row) == ("messages" in row))
        ):
            raise SpecdecUsageError(
                f'{where} line {number}: give {{"set": NAME, "content": CLASS, "text": PROMPT}} (or "messages": '
                "[{...}] instead of text)"
            )
        name = _plain(row["set"], "the set name", f"{where} line {number}")
        content = _plain(row.get("content", CUSTOM), "the content class", f"{where} line {number}")
        if contents.setdefault(name, content) != content:
            raise SpecdecUsageError(
                f"{where} line {number}: set {name!r} is {contents[name]!r} above and {content!r} here — one class a set"
            )
        texts.setdefault(name, []).append(row["text"] if "text" in row else row["messages"])  # checked by _texts
    if not texts:
        raise SpecdecUsageError(f"{where} holds no prompts")
    return {
        name: PromptSet(name, contents[name], _texts(name, contents[name], items, where))
        for name, items in texts.items()
    }


def choose(
    category: str | None, prompts: object, sets: Mapping[str, PromptSet], file: str | None
) -> tuple[str, PromptSet | None]:
    """The content class and the user's set a ``compare(category, prompts=...)`` asks for (``None``: built-in).

    ``category`` names a built-in class, ``all``, or a set of the prompt file; ``prompts`` the texts (a
    list), or a set of the prompt file by name, and then ``category`` is the content class it stands for.
    """
    where = f"the prompt file {file}" if file else 'no prompt file ([tool.specdec] prompts = "FILE")'
    if prompts is None:
        if category is None:
            return "code", None
        if category in sets:
            return sets[category].content, sets[category]
        if category in (*CATEGORIES, "all"):
            return category, None
        names = ", ".join(sorted(sets)) or "none"
        raise SpecdecUsageError(
            f"unknown prompt category {category!r} — use one of: {', '.join(CATEGORIES)}, all, or a set of "
            f"{where} (sets: {names})"
        )
    if isinstance(prompts, str):
        if prompts in sets:
            chosen = sets[prompts]
            return category or chosen.content, chosen
        hint = f" — choose it as compare({prompts!r})" if prompts in CATEGORIES else ""
        raise SpecdecUsageError(f"prompts={prompts!r} is no set of {where}{hint}")
    chosen = inline_set(prompts, category)
    return chosen.content, chosen
