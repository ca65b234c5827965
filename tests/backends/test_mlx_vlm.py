"""The mlx-vlm backend: the real mlx-vlm server where it runs (the embedded pair), and a stand-in for the block
drafters and MTP heads whose weights cannot be had here (``backends/mlx_vlm/standin.py``, cited from mlx-vlm 0.7.10).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from generations import generated

from pytest_specdec.backends.base import Arm, GenerationRequest, GenerationStats, ModelPair
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.backends.mlx_vlm.adapter import MlxVlmBackend
from pytest_specdec.backends.mlx_vlm.standin import MlxVlmHandler
from pytest_specdec.backends.server_process import reap_orphans
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer
from pytest_specdec.errors import ModelLoadError, SpecdecUsageError

PROMPT = "Copy this sentence exactly: the ferry leaves the north pier at seven."


@pytest.fixture
def start(engine: GenerationEngine) -> Iterator[Callable[..., StandinServer]]:
    running: list[StandinServer] = []

    def started(**settings: str) -> StandinServer:
        running.append(StandinServer(MlxVlmHandler, engine, settings=settings).start())
        return running[-1]

    yield started
    for server in running:
        server.stop()


def generate(backend: MlxVlmBackend, arm: Arm) -> tuple[tuple[int, ...], GenerationStats]:
    return generated(backend, GenerationRequest(PROMPT, arm, 12, seed=7))


STREAMS = pytest.mark.parametrize("stream", ["true", "false"])
CLAIM = """
import pytest


@pytest.mark.speedup(max=1.0)
def test_sd(specdec):
    specdec.compare(category="copy", max_tokens=8)
"""


def through_the_plugin(pytester: pytest.Pytester, plain: StandinServer, sd: StandinServer) -> pytest.RunResult:
    """A claim measured on the two servers through the plugin, two pairs."""
    pytester.makepyfile(CLAIM)
    return pytester.runpytest(
        "--backend=mlx-vlm", "--specdec-model=ignored", f"--specdec-backend-option=plain_url={plain.url}",
        f"--specdec-backend-option=sd_url={sd.url}", "--specdec-min-trials=2", "--specdec-max-trials=2",
        "-p", "no:cacheprovider",
    )  # fmt: skip


@STREAMS
@pytest.mark.parametrize(("kind", "expected"), [("dflash", SpeculationKind.BLOCK_DRAFTER),
                                                ("mtp", SpeculationKind.MTP_HEAD)])  # fmt: skip
def test_each_arm_goes_to_its_server_and_the_counts_are_the_servers(
    start: Callable[..., StandinServer], kind: str, expected: SpeculationKind, stream: str
) -> None:
    plain, sd = start(), start(draft_kind=kind, block_size="4")
    backend = MlxVlmBackend(ModelPair("ignored"), {"plain_url": plain.url, "sd_url": sd.url, "stream": stream})
    try:
        plain_units, plain_stats = generate(backend, Arm("plain"))
        sd_units, sd_stats = generate(backend, Arm("sd", True, 3))
        fingerprint = backend.fingerprint()
    finally:
        backend.close()
    assert plain_units, "the plain arm generated"
    assert plain_units == sd_units, "greedy SD reproduces the plain output"
    assert plain_stats.drafted == 0, "the plain server's timings carry no draft counts"
    assert sd_stats.drafted > 0
    assert 0 < sd_stats.accepted <= sd_stats.drafted
    assert [path for _, path, _ in plain.requests].count("/v1/chat/completions") == 1
    # The SD server's one more: the short completion that shows at start which kind its drafter runs as.
    assert [path for _, path, _ in sd.requests].count("/v1/chat/completions") == 2
    assert backend.speculation_kind() is expected
    assert fingerprint.release == "mlx-vlm 0.7.10"
    assert dict(fingerprint.versions) == {"mlx-vlm": "0.7.10"}, "a server it did not start: no library guessed"
    assert fingerprint.details["draft_kind_ran"] == kind
    assert backend.adapts_draft_length(), "no block size sent: the drafter's own"


def test_a_drafter_the_server_dropped_drafts_nothing_and_is_not_engaged(
    start: Callable[..., StandinServer], pytester: pytest.Pytester
) -> None:
    result = through_the_plugin(pytester, start(), start(draft_kind="dflash", drafter="incompatible"))
    result.stdout.fnmatch_lines(["*not measurable: SD not engaged (the sd arm drafted 0 tokens*"])


def test_a_verdict_row_through_the_plugin(start: Callable[..., StandinServer], pytester: pytest.Pytester) -> None:
    result = through_the_plugin(pytester, start(), start(draft_kind="dflash", block_size="4"))
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*mlx-vlm *copy*x [[]*2 *"])
    assert "not measurable" not in result.stdout.str()


def test_servers_that_do_not_make_a_pair_are_one_line(start: Callable[..., StandinServer]) -> None:
    plain, sd = start(), start(draft_kind="dflash")
    with pytest.raises(ModelLoadError, match=r"plain server at .* has a drafter loaded .* without --draft-model"):
        MlxVlmBackend(ModelPair("m"), {"plain_url": sd.url, "sd_url": sd.url})
    with pytest.raises(ModelLoadError, match=r"SD server at .* has no drafter — start it with --draft-model"):
        MlxVlmBackend(ModelPair("m"), {"plain_url": plain.url, "sd_url": plain.url})
    with pytest.raises(SpecdecUsageError, match=r"needs both plain_url= and sd_url="):
        MlxVlmBackend(ModelPair("m"), {"plain_url": plain.url})
    with pytest.raises(SpecdecUsageError, match=r"draft_kind='medusa' must be one of dflash, mtp, eagle3"):
        MlxVlmBackend(ModelPair("m", "d"), {"draft_kind": "medusa"})
    with pytest.raises(SpecdecUsageError, match=r"needs a drafter: --specdec-draft="):
        MlxVlmBackend(ModelPair("m"), {})


@STREAMS
def test_a_plain_language_model_as_drafter_fails_every_request_in_one_line(
    start: Callable[..., StandinServer], stream: str
) -> None:
    plain, sd = start(), start(draft_kind="dflash", drafter="plain-lm")
    said = r"failed the completion: " if stream == "true" else r"answered HTTP 500 .*Generation failed: "
    with pytest.raises(ModelLoadError, match=rf"mlx-vlm \(SD\) .*{said}.*target_layer_ids.* cannot run"):
        MlxVlmBackend(ModelPair("ignored"), {"plain_url": plain.url, "sd_url": sd.url, "stream": stream})


def test_the_real_server_with_the_embedded_pair_takes_the_draft_model_and_fails_its_first_sd_request() -> None:
    """mlx-vlm has no separate draft model: it loads one as a DFlash drafter ("speculative decoding enabled"),
    then every SD request fails (docs/measurements.md). The plugin starts both servers as a user would, and
    the first completion on the SD server (the one that shows its drafter's kind) says so before measuring."""
    pytest.importorskip("mlx_vlm", reason="the real mlx-vlm server (dev extra)")
    from pytest_specdec.embedded.models import DEFAULT_DRAFT, DEFAULT_TARGET, materialize

    pair = ModelPair(str(materialize(DEFAULT_TARGET)), str(materialize(DEFAULT_DRAFT)))
    with pytest.raises(ModelLoadError, match=r"mlx-vlm \(SD\) at .* failed the completion: .*target_layer_ids") as said:
        MlxVlmBackend(pair, {"python": sys.executable})
    assert "its drafter cannot run with this model" in str(said.value), "said before anything is measured"
    assert reap_orphans() == [], "both servers it started were stopped, none left to reap"


def test_the_servers_say_why_they_have_no_concurrency_axis(start: Callable[..., StandinServer]) -> None:
    from pytest_specdec.axes.concurrency import CONCURRENCY

    plain, sd = start(), start(draft_kind="dflash")
    backend = MlxVlmBackend(ModelPair("ignored"), {"plain_url": plain.url, "sd_url": sd.url})
    try:
        said = CONCURRENCY.refusal(2, backend)
    finally:
        backend.close()
    assert said == (
        "concurrency=2: mlx-vlm's draft counts are exact only one request at a time (they are the shared drafter's, "
        "speculative/common.py) — measure concurrency on llama-server"
    )


def test_the_libraries_under_servers_it_starts_are_read_from_their_interpreter(tmp_path: Path) -> None:
    """MLX moved mlx-vlm's DFlash2 from 1.47x to 1.71x with mlx-vlm unchanged: the fingerprint names MLX (and mlx-lm,
    transformers) as the servers' interpreter has them; an interpreter that cannot say gives none."""
    from importlib.metadata import version

    from pytest_specdec.backends.mlx_vlm.adapter import LIBRARIES, libraries_of

    found = libraries_of(sys.executable, LIBRARIES)
    assert found["mlx"] == version("mlx")
    assert found["transformers"] == version("transformers")
    assert libraries_of(sys.executable, ("no-such-package",)) == {}
    assert libraries_of(str(tmp_path / "no-python"), LIBRARIES) == {}
