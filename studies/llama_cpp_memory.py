"""What a llama-cpp-python context holds at long context, beside the memory check's estimate of it.

Run: ``python -m studies.llama_cpp_memory`` (``--n-ctx 1024 4096``). Not collected by pytest.

For the synthetic target and Gemma 3 270M, at each ``n_ctx``, with and without ``logits_all``
(the SD and the plain instance): llama.cpp's own "compute buffer size" and "output buffer size"
lines (loaded with ``verbose=True``, its log read from file descriptor 2), the growth of this
process's resident memory (``VmRSS``) while it evaluates a prompt that fills the context
(``n_ctx`` − 64 tokens), and
:func:`~pytest_specdec.backends.context.llama_cpp_buffer_bytes` with the KV cache and the score
rows those tokens fill (what ``LlamaCppBackend.context_bytes`` counts for the instance). Each load
runs in a fresh process so one does not reuse another's freed pages.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

MIB = 2**20


def probe(model: str, n_ctx: int, all_logits: bool) -> dict[str, float]:
    """One load and one 512-token evaluation, in this process."""
    from llama_cpp import Llama

    from pytest_specdec.backends.context import gguf_context, gguf_file_metadata, llama_cpp_buffer_bytes
    from pytest_specdec.backends.files import resolve_gguf
    from pytest_specdec.embedded import gguf_writer

    path = resolve_gguf(model) if model.startswith("pypi:") else gguf_writer.materialize_gguf(model)
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            llm = Llama(str(path), n_ctx=n_ctx, logits_all=all_logits, verbose=True)
        finally:
            os.dup2(saved, 2)
        log.seek(0)
        said = log.read().decode(errors="replace")
    before = resident()
    text = " ".join(f"word{i % 97}" for i in range(4 * n_ctx))
    tokens = llm.tokenize(text.encode(), add_bos=False)[: n_ctx - 64]  # a prompt that fills the context
    llm.eval(tokens)
    grown = resident() - before
    metadata = gguf_file_metadata(path)
    buffers = llama_cpp_buffer_bytes(metadata, llm.n_vocab(), n_ctx, flash_attention=False, all_logits=all_logits)
    buffers += gguf_context(metadata)[1] * n_ctx  # the KV cache, written as the prompt fills it
    scores = len(tokens) * llm.n_vocab() * 4 if all_logits else 0
    return {
        "compute": float(re.findall(r"compute buffer size =\s+([\d.]+) MiB", said)[-1]),
        "output": float(re.findall(r"output buffer size =\s+([\d.]+) MiB", said)[-1]),
        "grown": grown / MIB,
        "estimate": (buffers + scores) / MIB,
    }


def resident() -> float:
    with open("/proc/self/status", encoding="utf-8") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return float(line.split()[1]) * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-ctx", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--probe", nargs=3, help=argparse.SUPPRESS)  # model n_ctx all_logits: one row, as JSON
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(args.probe[0], int(args.probe[1]), args.probe[2] == "1")))
        return
    from pytest_specdec.embedded.models import DEFAULT_TARGET
    from pytest_specdec.embedded.packaged import GEMMA_GGUF

    print("| model | n_ctx | logits_all | compute buffer (llama.cpp) | output buffer | memory grown | estimate |")
    print("|---|---|---|---|---|---|---|")
    for model, name in ((DEFAULT_TARGET, "synthetic target"), (GEMMA_GGUF, "Gemma 3 270M")):
        for n_ctx in args.n_ctx:
            for all_logits in (False, True):
                command = [sys.executable, __file__, "--probe", model, str(n_ctx), "1" if all_logits else "0"]
                row = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
                print(
                    f"| {name} | {n_ctx} | {all_logits} | {row['compute']:.1f} MiB | {row['output']:.1f} MiB "
                    f"| {row['grown']:.0f} MiB | {row['estimate']:.0f} MiB |"
                )


if __name__ == "__main__":
    main()
