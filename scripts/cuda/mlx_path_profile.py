"""Where the plugin's mlx SD arm loses time against a bare ``stream_generate`` loop (issue #52).

Run: ``python scripts/cuda/mlx_path_profile.py ROUNDS`` (with mlx-lm importable; on the H200 after
``scripts/cuda/mlx_setup.sh``). The embedded pair, ``copy`` prompts, 64 tokens, γ = 3, on the
plugin's own loaded weights. Each round runs, in a cyclic Latin square, the plugin's SD and plain
arms as ``run_trial`` runs them and bare loops that step from the bare loop of
``studies/arm_agreement.py`` towards the plugin's path, each adding one thing the plugin does:
the prompt's token ids instead of its text, mlx-lm's default sampler instead of an explicit greedy
one, the target and draft inside the plugin's counting wrappers, the stream closed after the last
token. Prints per harness the median tok/s, then the plugin's tok/s over each other harness's, per
round, with the median's distribution-free 95 % interval (against the bare loop with everything
added, what is left is the adapter's own loop over mlx-lm's responses and ``timed_generation``);
then each bare step against the one before it. With mlx-lm 0.32.2 and the embedded
model only the wrappers change what is timed (``make_sampler(temp=0)`` is the greedy sampler
``stream_generate`` uses when given none, the tokenizer adds no BOS token, ``close()`` comes after
the last stamp): those steps compare a harness with itself, and their spread is the resolution.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from pytest_specdec.backends import load_backend, profile_pairs
from pytest_specdec.backends.base import GenerationRequest, ModelPair
from pytest_specdec.backends.mlx_lm_parts import CountedModel
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure.trial import timed_generation
from studies.arm_agreement import PLAIN, SD, interleaved, median_interval, timed

TOKENS = 64
rounds = int(sys.argv[1])
pair = profile_pairs("embedded")["mlx"]
backend: Any = load_backend("mlx", ModelPair(pair.target, pair.draft), {})
prompts = prompts_for("copy", "continuation" if backend.is_base_model() else "instruction")


def plugin(speculative: bool) -> Any:
    """The plugin's arm as ``run_trial`` runs it: the first token, then the rest in one burst."""

    def run(text: str) -> float:
        timing = timed_generation(
            backend, GenerationRequest(text, SD if speculative else PLAIN, TOKENS, every_token=False), time.perf_counter
        )
        return (len(timing.tokens) - 1) / (timing.last_at - timing.first_at)

    return run


def bare(speculative: bool = True, ids: bool = False, default_sampler: bool = False, counted: bool = False,
         close: bool = False) -> Any:  # fmt: skip
    """The bare loop, with each of the plugin's differences added as asked."""
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    model, tokenizer, draft = backend._target.model, backend._target.tokenizer, backend._draft.model
    greedy = make_sampler(temp=0.0)

    def run(text: str) -> float:
        target = CountedModel(model) if counted else model
        extra: dict[str, Any] = {} if default_sampler else {"sampler": greedy}
        if speculative:
            extra.update(draft_model=CountedModel(draft, after=target) if counted else draft, num_draft_tokens=3)
        prompt = backend._prompt_ids(text) if ids else text
        stream = stream_generate(target, tokenizer, prompt, max_tokens=TOKENS, **extra)
        rate, _ = timed(stream, TOKENS)
        if close:
            stream.close()
        return rate

    return run


harnesses = {
    "plugin SD": plugin(True), "bare SD": bare(), "bare SD + ids": bare(ids=True),
    "bare SD + ids + default sampler": bare(ids=True, default_sampler=True),
    "bare SD + ids + default sampler + counted": bare(ids=True, default_sampler=True, counted=True),
    "bare SD + all + close()": bare(ids=True, default_sampler=True, counted=True, close=True),
    "plugin plain": plugin(False), "bare plain": bare(speculative=False),
}  # fmt: skip
names = list(harnesses)
results = interleaved(harnesses, [prompt.text for prompt in prompts], rounds)

print(f"mlx embedded [copy], {rounds} rounds, {TOKENS} tokens, γ=3, the plugin's own weights")
print("| harness | median tok/s |")
print("|---|---|")
for name, rates in results.items():
    print(f"| {name} | {statistics.median(rates):.1f} |")
print("| harness ÷ harness (per round) | median [95 % interval] | mean |")
print("|---|---|---|")
steps = [(names[k], names[k - 1]) for k in range(2, 6)]  # each step on its own (the plugin's last: above)
for mine, name in [*(("plugin SD", name) for name in names[1:6]), ("plugin plain", "bare plain"), *steps]:
    ratios = [p / b for p, b in zip(results[mine], results[name], strict=True)]
    median, low, high = median_interval(ratios)
    print(f"| {mine} ÷ {name} | {median:.4f} [{low:.4f}, {high:.4f}] | {statistics.fmean(ratios):.4f} |")
