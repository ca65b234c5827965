"""The context axis: prompts behind a prefix of N tokens, what fits here, and the sweep's summary and plot."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest

from pytest_specdec.axes import Conditions
from pytest_specdec.axes.context import CONTEXT
from pytest_specdec.backends.context import config_context, gguf_context
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import NotMeasurableHere, SpecdecUsageError
from pytest_specdec.measure.context import context_needs, prefix_text, prefixed_prompts, with_context
from pytest_specdec.render.sweep import SweepPoint, change_line, sweep_line
from pytest_specdec.render.verdict_table import category_cell
from pytest_specdec.stats import Interval
from pytest_specdec.store.baselines import baseline_key
from pytest_specdec.store.records import ComparisonRecord

SIM = ("--backend=simulated", "-p", "no:cacheprovider")


def words(text: str) -> int:
    return len(text.split())


def characters(text: str) -> int:
    return len(text)


@pytest.mark.parametrize("tokens", [1, 37, 500, 4096])
@pytest.mark.parametrize("count", [words, characters])
def test_a_prefix_is_the_longest_suite_text_of_at_most_n_tokens(tokens: int, count: object) -> None:
    counter = count if callable(count) else words
    prefix = prefix_text(tokens, counter)
    assert counter(prefix) == tokens  # words and characters can be cut exactly


def test_a_tokenizer_that_counts_nothing_is_one_line_not_an_endless_prefix() -> None:
    with pytest.raises(SpecdecUsageError, match="counted no tokens in the suite's text"):
        prefix_text(100, lambda _: 0)


def test_a_tokenizer_whose_count_stops_growing_is_one_line_not_an_endless_loop() -> None:
    """One that caps what it counts (a model's maximum length) never passes the wanted length (issue #51)."""
    with pytest.raises(SpecdecUsageError, match=r"token count stopped growing at 512 tokens for .* of 4096 tokens$"):
        prefix_text(4096, lambda text: min(len(text.split()), 512))


def test_each_prompt_gets_a_prefix_of_its_own_and_keeps_its_id() -> None:
    prompts = prompts_for("code")
    prefixed = with_context(prompts, 300, words)
    assert [p.id for p in prefixed] == [p.id for p in prompts]
    assert all(
        p.text.endswith(o.text) and words(p.text) == 300 + words(o.text) for p, o in zip(prefixed, prompts, strict=True)
    )
    assert len({p.text[:200] for p in prefixed}) == len(prompts)  # no two prompts share a prefix
    assert with_context(prompts, 0, words) == prompts


class FakeContext:
    name = "fake"

    def __init__(self, window: int, per_token: int) -> None:
        self.window, self.per_token = window, per_token

    def count_tokens(self, text: str) -> int:
        return words(text)

    def template_tokens(self) -> int:
        return 7

    def context_window(self) -> int:
        return self.window

    def context_bytes(self, tokens: int) -> int:
        return tokens * self.per_token

    def prepare_context(self, tokens: int) -> None:
        self.prepared = tokens


def test_a_length_beyond_the_window_or_the_memory_is_not_measurable_with_its_numbers() -> None:
    prompts = prompts_for("code")[:2]
    needs = context_needs(
        FakeContext(4096, 1000), with_context(prompts, 2000, words), generated=32, look_ahead=3,
        weight_bytes=1e9, usable_bytes=2e9,
    )  # fmt: skip
    assert needs.problem is None
    assert needs.tokens == max(2000 + words(p.text) for p in prompts)
    assert needs.positions == needs.tokens + 32 + 3 + 1 + 7  # generated, look-ahead, the next position, template
    assert needs.fit.needed_bytes == 1e9 + needs.positions * 1000
    short = context_needs(
        FakeContext(2048, 1000), with_context(prompts, 2000, words), generated=32, look_ahead=3,
        weight_bytes=1e9, usable_bytes=2e9,
    )  # fmt: skip
    assert short.problem is not None
    assert "exceed the target's 2048-token window" in short.problem
    heavy = context_needs(
        FakeContext(8192, 1_000_000), with_context(prompts, 2000, words), generated=32, look_ahead=3,
        weight_bytes=1e9, usable_bytes=2e9,
    )  # fmt: skip
    assert heavy.problem is not None
    assert heavy.problem.startswith("does not fit: 1.0 GB weights + 2.1 GB caches and buffers")
    with pytest.raises(NotMeasurableHere, match=r"context=5000 is not measurable here: .*4096-token window"):
        prefixed_prompts(
            FakeContext(4096, 1), prompts, 5000, generated=32, look_ahead=3, weight_bytes=0, usable_bytes=1e12
        )  # type: ignore[arg-type]


def test_a_backend_that_cannot_count_tokens_is_refused_in_one_line() -> None:
    class Uncounting:  # what Ollama's and MTPLX's adapters are: no tokenizer of the target in this process
        name = "ollama"

    backend = Uncounting()
    every = "count_tokens, template_tokens, context_window, context_bytes, prepare_context"
    with pytest.raises(SpecdecUsageError, match=f"backend 'ollama' lacks {every} \\(the KnowsContext protocol\\)"):
        prefixed_prompts(backend, prompts_for("code"), 1024, generated=32, look_ahead=3, weight_bytes=0, usable_bytes=1)  # type: ignore[arg-type]

    class BeforeTemplates:  # an out-of-tree backend written before template_tokens: named, not guessed
        name = "old"
        count_tokens, context_window = FakeContext.count_tokens, FakeContext.context_window
        context_bytes, prepare_context = FakeContext.context_bytes, FakeContext.prepare_context

    with pytest.raises(SpecdecUsageError, match=r"backend 'old' lacks template_tokens \(the KnowsContext"):
        prefixed_prompts(
            BeforeTemplates(), prompts_for("code"), 1024, generated=32, look_ahead=3, weight_bytes=0, usable_bytes=1
        )  # type: ignore[arg-type]


def test_the_kv_cache_per_token_is_read_from_a_config_and_from_gguf_keys() -> None:
    config = {"num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256}
    assert config_context({**config, "max_position_embeddings": 4096, "torch_dtype": "float16"}) == (
        4096,
        2 * 8 * 2 * 64 * 2,
    )
    nested = {"text_config": {**config, "head_dim": 128, "max_position_embeddings": 32768}, "torch_dtype": "float32"}
    assert config_context(nested) == (32768, 2 * 8 * 2 * 128 * 4)
    gemma3 = {
        "general.architecture": "gemma3", "gemma3.block_count": "18", "gemma3.attention.head_count": "4",
        "gemma3.attention.head_count_kv": "1", "gemma3.attention.key_length": "256",
        "gemma3.attention.value_length": "256", "gemma3.context_length": "32768", "gemma3.embedding_length": "640",
    }  # fmt: skip
    assert gguf_context(gemma3) == (32768, 18 * 1 * 512 * 2)
    llama = {"general.architecture": "llama", "llama.block_count": "8", "llama.attention.head_count": "4",
             "llama.embedding_length": "256", "llama.context_length": "4096"}  # fmt: skip
    assert gguf_context(llama) == (4096, 8 * 4 * 128 * 2)  # no kv count: every head; no key length: 256 ÷ 4


@pytest.mark.parametrize(
    ("steps", "said"),
    [
        (
            [("ctx=0", "pays off"), ("ctx=2K", "pays off"), ("ctx=8K", "slower")],
            "pays off up to ctx=2K, slower from ctx=8K",
        ),
        (
            [("ctx=0", "pays off"), ("ctx=2K", "undecided"), ("ctx=8K", "slower")],
            "pays off up to ctx=0, slower from ctx=8K",
        ),
        ([("ctx=0", "holds"), ("ctx=2K", "holds")], "holds at every value decided (ctx=0, ctx=2K)"),
        ([("ctx=0", "undecided"), ("ctx=2K", "inconclusive")], "undecided at every value"),
    ],
)
def test_where_an_answer_changes_reads_decisive_answers_only(steps: list[tuple[str, str]], said: str) -> None:
    assert change_line(steps) == said


def test_a_length_whose_decode_speedup_was_not_read_shows_none_rather_than_the_end_to_end_one() -> None:
    faster, slower = Interval(1.4, 1.2, 1.6, 0.98, 8), Interval(0.8, 0.7, 0.9, 0.98, 8)
    points = [
        SweepPoint("ctx=0", 0, 0.0, "95", faster, faster, None, "holds", failed=False),
        SweepPoint("ctx=8K", 8192, 8192.0, "8271", None, slower, None, "refuted", failed=False),
    ]
    line = sweep_line("t", CONTEXT, "copy", points, [])
    assert "ctx=8K (8271 prompt tokens) decode -, end to end 0.80x [0.70, 0.90]" in line
    assert "decode pays off at every value decided (ctx=0)" in line, "an unread decode is no answer"
    assert "end to end pays off up to ctx=0, slower from ctx=8K" in line


def test_a_context_sweep_rows_summary_and_plot_say_where_sd_stops_paying_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.speedup(min=1.1)\n"
        "def test_sweep(specdec):\n    specdec.context_sweep([0, 1024, 4096, 2_000_000], max_trials=16)\n"
    )
    options = ("speedup=1.5", "context_decay=0.5", "draft_prefill=0.3", "prefill_tps=500")
    args = [a for o in options for a in ("--specdec-backend-option", o)]
    result = pytester.runpytest(*SIM, *args, "--specdec-plot", "run.png", "--specdec-json", "run.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "ctx=1K: speedup 0.* behind 1024 tokens of context < claimed min 1.1x*",
            "*context sweep [[]code[]]: ctx=0 (* prompt tokens) decode 1.*x*, end to end *; "
            "ctx=1K (10* prompt tokens) decode 0.*"
            " — decode pays off up to ctx=0, slower from ctx=1K; end to end pays off up to ctx=0, slower from ctx=1K;"
            " verdict holds up to ctx=0, refuted from ctx=1K;"
            " not measured here: context=2000000 is not measurable here: *window*",
            "*code, ctx=1K *refuted*",  # the table comes last, after the notes and the sweep's line
            "*code, ctx=4K *refuted*",
        ]
    )
    records = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    assert [(r["conditions"].get("context"), str(r["samples"][0]["prompt_tokens"])[:1]) for r in records] == [
        (None, "1"),
        (1024, "1"),
        (4096, "4"),
    ]  # the prompt tokens that ran, as the backend counted them (prefix and prompt)
    assert not {"context", "prompt_tokens", "sampling", "speedup_of"} & {k for r in records for k in r["scope"]}
    plot = pytester.path / "run-context-test_sweep.png"
    from PIL import Image

    drawn = json.loads(Image.open(plot).text["specdec"])
    decode = [d for d in drawn if d["metric"] == "decode"]
    assert [d["context"] for d in decode] == [0, 1024, 4096]
    assert decode[0]["low"] > 1.0 > decode[1]["high"]
    acceptance = [d for d in drawn if d["metric"] == "acceptance"]
    assert [d["context"] for d in acceptance] == [0, 1024, 4096]
    assert [r["acceptance"]["estimate"] for r in records] == [d["estimate"] for d in acceptance]
    assert [d for d in drawn if d["metric"] == "verdict change"] == [
        {"metric": "verdict change", "context": 1024, "said": "holds → refuted"}
    ], "the length from which the verdict changes, as the summary line says"
    end_to_end = [d["estimate"] for d in drawn if d["metric"] == "end to end"]
    assert [r["other_speedup"]["estimate"] for r in records] == end_to_end, "kept in the results, not only drawn"
    assert all(s["baseline_first_token_s"] > 0 and s["treatment_first_token_s"] > 0
               for r in records for s in r["samples"]), "each pair's time to first token, both arms"  # fmt: skip
    (absent,) = [d["reason"] for d in drawn if d["metric"] == "not measured"]
    assert "context=2000000 is not measurable here" in absent


def test_one_comparison_beyond_the_window_skips_and_a_negative_context_is_a_usage_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        "def test_far(specdec):\n    specdec.compare('code', context=2_000_000)\n\n"
        "def test_negative(specdec):\n    specdec.compare('code', context=-1)\n"
    )
    result = pytester.runpytest(*SIM, "-rs")
    result.assert_outcomes(skipped=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*context=-1 is negative — give the prefix length in tokens, 0 for none*",
            "SKIPPED*context=2000000 is not measurable here: *exceed the target's 1048576-token window*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_long_context_result_has_its_own_key_and_row_and_the_short_one_keeps_its_key(
    make_record: Callable[..., ComparisonRecord],
) -> None:
    short = make_record("code", 1.5, "holds", None)
    long = replace(short, conditions=short.conditions.with_(context=8192))
    assert ", ctx=" not in baseline_key(short)
    assert baseline_key(long) == baseline_key(short).replace("γ=3,", "γ=3, ctx=8K,")
    assert category_cell(long) == "code, ctx=8K"
    assert replace(short, conditions=Conditions({"num_draft": 3, "context": 1000})).conditions.labels == ("ctx=1000",)


def test_a_plot_path_that_cannot_be_written_is_a_note_not_a_traceback(pytester: pytest.Pytester) -> None:
    pytester.mkdir("taken.png")
    pytester.makepyfile("def test_sweep(specdec):\n    specdec.context_sweep([0], max_trials=4, plot='taken.png')\n")
    result = pytester.runpytest(*SIM, "--specdec-min-trials=4")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*cannot write taken.png: * — choose a writable .png path*"])
    assert "Traceback" not in result.stdout.str()
