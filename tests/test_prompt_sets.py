"""A user's own prompts: a prompt file's named sets and ``compare(prompts=[...])``, measured as given, keyed by
their digest (an edited set is a new key naming the one it replaces), their texts kept off every stored file."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_specdec.embedded.prompt_sets import choose, digest_of, inline_set, read_prompt_file
from pytest_specdec.embedded.prompts import CATEGORIES, ChatMessage, prompts_for
from pytest_specdec.errors import SpecdecUsageError

REPO = Path(__file__).resolve().parents[1]
SIM = ("--backend=simulated", "-p", "no:cacheprovider", "--specdec-max-trials=8", "--specdec-min-trials=8")
MACHINE = "Test-Machine-P"
SECRET = "Reply to Mrs Okafor, whose parcel 7731 is late"

PROMPT_FILE = f"""\
[sets.support]
content = "prose"
prompts = ["{SECRET}.", "Apologise for a double charge on invoice 4410."]
"""


@pytest.fixture(autouse=True)
def _machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)


def test_a_toml_and_a_jsonl_file_give_the_same_set_with_the_same_digest(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(PROMPT_FILE, encoding="utf-8")
    lines = [{"set": "support", "content": "prose", "text": t} for t in (f"{SECRET}.", "Apologise for a double "
                                                                         "charge on invoice 4410.")]  # fmt: skip
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    toml, jsonl = (read_prompt_file(tmp_path / name, "--specdec-prompts")["support"] for name in ("p.toml", "p.jsonl"))
    assert toml.prompts == jsonl.prompts
    assert toml.content == "prose"
    assert toml.digest == hashlib.sha256(json.dumps([p.text for p in toml.prompts]).encode()).hexdigest()
    assert toml.label == f"support#{toml.digest[:12]}"
    assert [p.id for p in toml.prompts] == ["support-1", "support-2"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[sets.a]\nprompts = []\n", "set 'a' needs a non-empty list of prompt texts"),
        ('[sets.a]\nprompts = [[{role = "robot", content = "hi"}]]\n', "prompt 1 of set 'a': message 1 is"),
        ('[sets.a]\nprompts = [[{role = "assistant", content = "hi"}]]\n', "ends on a turn the model answers"),
        ("[sets.a]\nprompts = [[]]\n", "a conversation needs messages"),
        ("[sets.a]\nprompts = [3]\n", "not a non-empty text or a list of chat messages"),
        ('[sets."a b"]\nprompts = ["x"]\n', "the set name 'a b' is not a plain name"),
        ('[sets.a]\ncontent = "prose"\nprompt = ["x"]\n', "[sets.a] takes content"),
        ("prompts = [", "is not TOML"),
        ('title = "x"\n', "holds no [sets.NAME] tables"),
    ],
)
def test_a_bad_prompt_file_is_one_line_naming_the_file_and_the_fix(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / "p.toml").write_text(text, encoding="utf-8")
    with pytest.raises(SpecdecUsageError, match="prompt file") as raised:
        read_prompt_file(tmp_path / "p.toml", "--specdec-prompts")
    assert said in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_jsonl_set_has_one_content_class_and_a_missing_file_says_so(tmp_path: Path) -> None:
    rows = [{"set": "a", "content": "code", "text": "x"}, {"set": "a", "content": "prose", "text": "y"}]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    with pytest.raises(SpecdecUsageError, match="line 2: set 'a' is 'code' above and 'prose' here"):
        read_prompt_file(tmp_path / "p.jsonl", "--specdec-prompts")
    with pytest.raises(SpecdecUsageError, match="does not exist — create it or correct the path"):
        read_prompt_file(tmp_path / "absent.toml", "--specdec-prompts")


def test_the_category_names_a_built_in_class_or_a_set_and_prompts_replace_the_built_in_set(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(PROMPT_FILE, encoding="utf-8")
    sets = read_prompt_file(tmp_path / "p.toml", "--specdec-prompts")
    assert choose(None, None, sets, "p.toml") == ("code", None)
    assert choose("creative", None, sets, "p.toml") == ("creative", None)
    assert choose("support", None, sets, "p.toml") == ("prose", sets["support"])
    assert choose("chat", "support", sets, "p.toml") == ("chat", sets["support"])
    content, inline = choose(None, ["a", "b"], sets, None)
    assert (content, inline) == ("custom", inline_set(["a", "b"], None))
    with pytest.raises(SpecdecUsageError, match=r"unknown prompt category 'mine' .* \(sets: support\)"):
        choose("mine", None, sets, "p.toml")
    with pytest.raises(SpecdecUsageError, match=r"prompts='prose' is no set of .* choose it as compare\('prose'\)"):
        choose(None, "prose", sets, "p.toml")
    with pytest.raises(SpecdecUsageError, match="prompt 2 of set 'inline' is 3"):
        choose(None, ["a", 3], sets, None)


CHAT_FILE = """\
[sets.support-chat]
content = "chat"
prompts = [
  [{role = "system", content = "You answer for a parcel service."}, {role = "user", content = "Where is 7731?"}],
  "A plain text beside them.",
]
"""


def test_a_set_may_hold_conversations_in_toml_jsonl_or_compare(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(CHAT_FILE, encoding="utf-8")
    messages = [{"role": "system", "content": "You answer for a parcel service."},
                {"role": "user", "content": "Where is 7731?"}]  # fmt: skip
    rows = [{"set": "support-chat", "content": "chat", "messages": messages},
            {"set": "support-chat", "content": "chat", "text": "A plain text beside them."}]  # fmt: skip
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    toml, jsonl = (read_prompt_file(tmp_path / n, "--specdec-prompts")["support-chat"] for n in ("p.toml", "p.jsonl"))
    assert toml == jsonl
    assert toml.prompts[0].messages == (ChatMessage(**messages[0]), ChatMessage(**messages[1]))
    assert toml.prompts[0].text == "System: You answer for a parcel service.\n\nUser: Where is 7731?\n\nAssistant:"
    assert not toml.prompts[1].messages
    assert inline_set([messages, "A plain text beside them."], "chat").digest == toml.digest
    # the same transcript from other messages is another set: the digest holds the messages
    one = inline_set([[{"role": "system", "content": "S\n\nUser: Q"}, {"role": "user", "content": "x"}]], "chat")
    two = inline_set([[{"role": "system", "content": "S"}, {"role": "user", "content": "Q\n\nUser: x"}]], "chat")
    assert one.prompts[0].text == two.prompts[0].text
    assert one.digest != two.digest
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"set": "a", "text": "x", "messages": messages}) + "\n", encoding="utf-8")
    with pytest.raises(SpecdecUsageError, match=r'line 1: give .* \(or "messages"'):
        read_prompt_file(bad, "--specdec-prompts")


def test_the_built_in_content_classes_include_creative_tool_calls_and_chat_in_both_forms() -> None:
    assert all(p.messages for p in prompts_for("chat"))
    assert not any(p.messages for p in prompts_for("chat", "continuation")), "a base model continues a transcript"
    assert {p.category for p in prompts_for("all")} == set(CATEGORIES) - {"chat"}, "all: every class that is text"
    for content in ("creative", "tool-call", "chat"):
        instruction, continuation = prompts_for(content), prompts_for(content, "continuation")
        assert len(instruction) == len(continuation) == 4
        assert [p.id for p in instruction] == [p.id for p in continuation]
        assert digest_of(instruction) != digest_of(continuation)


CLAIMS = """\
import pytest

@pytest.mark.speedup(min=0.5)
def test_support(specdec):
    specdec.compare("support")

def test_inline(specdec):
    specdec.compare("code", prompts=["def add(a, b):", "class Stack:", "SELECT name FROM"])
"""


def records_of(pytester: pytest.Pytester) -> dict[str, Any]:
    """The run's comparisons (``--specdec-json=run.json``) by test name."""
    return {r["nodeid"].split("::")[1]: r for r in json.loads((pytester.path / "run.json").read_text())["comparisons"]}


def prompt_project(pytester: pytest.Pytester, prompt_file: str, claims: str) -> None:
    """A project whose ``[tool.specdec] prompts`` names ``sd-prompts.toml`` (``prompt_file``), with ``claims``."""
    pytester.makepyprojecttoml('[tool.specdec]\nprompts = "sd-prompts.toml"\n')
    (pytester.path / "sd-prompts.toml").write_text(prompt_file, encoding="utf-8")
    pytester.makepyfile(test_claims_of_the_project=claims)


def test_a_prompt_file_set_is_measured_keyed_by_digest_and_an_edit_names_the_key_it_replaces(
    pytester: pytest.Pytester,
) -> None:
    prompt_project(pytester, PROMPT_FILE, CLAIMS)
    first = pytester.runpytest(*SIM, "--specdec-json=run.json", "--specdec-update-baselines")
    first.assert_outcomes(passed=2)
    records = records_of(pytester)
    support = read_prompt_file(pytester.path / "sd-prompts.toml", "x")["support"]
    assert records["test_support"]["conditions"]["prompt_set"] == support.label
    assert records["test_support"]["category"] == "prose"
    assert records["test_support"]["scope"]["prompt_digest"] == support.digest
    assert {p["prompt_id"] for p in records["test_support"]["samples"]} == {"support-1", "support-2"}
    assert records["test_inline"]["scope"]["prompts"] == "given"
    assert records["test_inline"]["conditions"]["prompt_set"].startswith("inline#")
    built_in = records["test_inline"]["scope"]["prompt_digest"]
    assert built_in == inline_set(["def add(a, b):", "class Stack:", "SELECT name FROM"], "code").digest
    stored = [*(pytester.path / "baselines").rglob("*.json*"), pytester.path / "run.json"]
    assert stored
    assert all(SECRET not in path.read_text(encoding="utf-8") for path in stored)
    accepted = json.loads((pytester.path / "baselines" / MACHINE / "simulated.json").read_text())["entries"]
    assert any(f"[prose, γ=3, prompts={support.label}," in key for key in accepted)

    (pytester.path / "sd-prompts.toml").write_text(PROMPT_FILE.replace("4410", "4411"), encoding="utf-8")
    edited = read_prompt_file(pytester.path / "sd-prompts.toml", "x")["support"]
    second = pytester.runpytest(*SIM, "--specdec-json=run.json", "test_claims_of_the_project.py::test_support")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(
        [f"*not yet gated*only in prompts={support.label} → prompts={edited.label}*remove the old entry*"]
    )


def test_a_bad_prompt_file_fails_only_the_specdec_tests_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml('[tool.specdec]\nprompts = "missing.toml"\n')
    pytester.makepyfile(test_unit="def test_plain():\n    assert 1 + 1 == 2\n")
    pytester.runpytest(*SIM).assert_outcomes(passed=1)
    pytester.makepyfile(test_support_claims=CLAIMS)
    result = pytester.runpytest(*SIM)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*prompt file */missing.toml (--specdec-prompts / *) does not exist*"])


def marked_blocks(document: Path, marker: str) -> list[str]:
    """The fenced blocks after ``<!-- marker`` up to the next heading, as written."""
    text = document.read_text(encoding="utf-8")
    after = text[text.index(f"<!-- {marker}") :]
    section = after.split("\n## ", 1)[0]
    return section.split("```")[1::2]


def write_blocks(blocks: list[str], folder: Path) -> list[str]:
    """Each block whose first line is ``# FILE`` written to FILE; the other blocks' lines (the commands)."""
    commands = []
    for block in blocks:
        _, _, body = block.partition("\n")
        first = body.splitlines()[0] if body.strip() else ""
        if first.startswith("# ") and "." in first:
            (folder / first[2:].strip()).write_text(body, encoding="utf-8")
        else:
            commands += [line for line in body.splitlines() if line.strip()]
    return commands


def test_the_readme_example_measures_its_prompt_set_as_written(tmp_path: Path) -> None:
    (command,) = write_blocks(marked_blocks(REPO / "README.md", "readme-own-prompts"), tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"pyproject.toml", "sd-prompts.toml", "test_my_prompts.py"}
    words = command.split()
    assert words[0] == "pytest"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *words[1:], "-p", "no:cacheprovider", "--specdec-json=run.json"],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr  # the claim may fail: it is measured, not assumed
    assert "support prompts" in done.stdout
    (record,) = json.loads((tmp_path / "run.json").read_text())["comparisons"]
    support = read_prompt_file(tmp_path / "sd-prompts.toml", "x")["support"]
    assert record["conditions"]["prompt_set"] == support.label
    assert record["category"] == "prose"
    assert record["backend"] == "mlx"
    assert {s["prompt_id"] for s in record["samples"]} <= {"support-1", "support-2", "support-3"}


def test_the_writing_claims_page_example_runs_as_written(pytester: pytest.Pytester) -> None:
    blocks = marked_blocks(REPO / "docs" / "writing-claims.md", "docs-claims")
    assert write_blocks(blocks, pytester.path) == []
    result = pytester.runpytest(*SIM, "test_claims_of_mine.py")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_sd_on_my_code_prompts: *x on inline*"])


def test_a_new_content_class_leaves_the_embedded_models_and_the_context_filler_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The synthetic models' tokenizer (so their weights' shape and digest, in every embedded key) and a context
    prefix's text come from the first four classes: a fifth class's prompts change neither."""
    from pytest_specdec.embedded import prompts
    from pytest_specdec.embedded.models import build_tokenizer
    from pytest_specdec.measure.context import prefix_text

    def count(text: str) -> int:
        return len(text.split())

    before = (build_tokenizer().to_str(), prefix_text(300, count, 3))
    extra = prompts.Prompt("limerick-1", "limerick", "There once was a tokenizer trained on whatever was new " * 8)
    monkeypatch.setattr(prompts, "SUITE", (*prompts.SUITE, extra))
    monkeypatch.setattr(prompts, "CONTINUATION_SUITE", (*prompts.CONTINUATION_SUITE, extra))
    from pytest_specdec.measure import context

    monkeypatch.setattr(context, "SUITE", prompts.SUITE)
    monkeypatch.setattr(context, "CONTINUATION_SUITE", prompts.CONTINUATION_SUITE)
    assert (build_tokenizer().to_str(), prefix_text(300, count, 3)) == before
