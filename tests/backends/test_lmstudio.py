"""The lmstudio backend through the real ``lmstudio`` SDK against the stand-in LM Studio server.

The stand-in (``backends/lmstudio/standin.py``) answers what the installed SDK sends and parses, each message
cited there; these tests run the SDK unmodified, so a message it would not accept fails them.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from generations import generated

from pytest_specdec.backends.base import Arm, GenerationRequest, GenerationStats, ModelPair
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer
from pytest_specdec.errors import ModelLoadError, SpecdecUsageError
from pytest_specdec.gate.legs import leg_server, read_gate_config

pytest.importorskip("lmstudio", reason="the lmstudio backend's SDK (extra [lmstudio])")

from pytest_specdec.backends.lmstudio.adapter import LmStudioBackend
from pytest_specdec.backends.lmstudio.doctor import server_findings
from pytest_specdec.backends.lmstudio.standin import DRAFT, DRAFT_KEY, TARGET, LmStudioHandler, config_fields

PROMPT = "Copy this sentence exactly: the ferry leaves the north pier at seven."
PAIR = ModelPair(TARGET, DRAFT)


@pytest.fixture
def server(engine: GenerationEngine, request: pytest.FixtureRequest) -> Iterator[StandinServer]:
    settings = getattr(request, "param", {})
    running = StandinServer(LmStudioHandler, engine, settings=settings).start()
    yield running
    running.stop()


def host(server: StandinServer) -> str:
    return server.url.removeprefix("http://")


def generate(backend: LmStudioBackend, arm: Arm) -> tuple[tuple[int, ...], GenerationStats]:
    return generated(backend, GenerationRequest(PROMPT, arm, 12, seed=7))


def test_the_sd_arm_sends_the_draft_model_and_reads_lm_studios_own_counts(server: StandinServer) -> None:
    backend = LmStudioBackend(PAIR, {"host": host(server)})
    try:
        plain_units, plain = generate(backend, Arm("plain"))
        sd_units, sd = generate(backend, Arm("sd", True, 3))
        fingerprint = backend.fingerprint()
    finally:
        backend.close()
    assert plain_units, "the plain arm generated"
    assert plain_units == sd_units, "greedy SD reproduces the plain output"
    assert (plain.drafted, plain.accepted) == (0, 0)
    assert sd.drafted > 0
    assert 0 < sd.accepted <= sd.drafted
    assert plain.generated_tokens == sd.generated_tokens == 12
    predictions = [body for method, _, body in server.requests if method == "WS" and body.get("endpoint") == "predict"]
    drafts = [config_fields(p["creationParameter"]["predictionConfigStack"]).get(DRAFT_KEY) for p in predictions]
    assert drafts == [None, DRAFT], "the plain request carries no draft model, the SD request names it"
    assert fingerprint.release == "LM Studio 0.3.31 (llama.cpp engine)", "the app's release and the engine"
    assert fingerprint.versions["lmstudio"], "the SDK's release beside the app's"
    assert backend.adapts_draft_length(), "no draft length is sent: LM Studio's own is the default arm"
    from pytest_specdec.axes.concurrency import CONCURRENCY

    assert "sends one prediction at a time" in str(CONCURRENCY.refusal(2, backend)), "no concurrency axis, said"


@pytest.mark.parametrize("server", [{"engine": "mlx", "draft_ignored": "true", "version": "0.3.32"}], indirect=True)
def test_an_mlx_engine_that_never_drafts_reads_not_engaged_with_its_reason(server: StandinServer) -> None:
    backend = LmStudioBackend(PAIR, {"host": host(server)})
    try:
        _, sd = generate(backend, Arm("sd", True, 3))
        evidence = backend.speculation_evidence()
        fingerprint = backend.fingerprint()
    finally:
        backend.close()
    assert sd.drafted == 0, "LM Studio counted no draft for the request: it drafted nothing"
    assert evidence.sd_arm is False
    assert "counted no drafted token in any of the 1 SD request(s) (draft model used: none)" in evidence.reason
    assert "MTP heads" in evidence.reason, "the MLX engine's known refusals, one line"
    assert fingerprint.release == "LM Studio 0.3.32 (MLX engine)"


def test_a_model_lm_studio_does_not_have_and_a_server_that_is_not_there_are_one_line(server: StandinServer) -> None:
    with pytest.raises(ModelLoadError, match=r"has no model 'qwen-absent' — download it \(`lms get`\)"):
        LmStudioBackend(ModelPair("qwen-absent", DRAFT), {"host": host(server)})
    with pytest.raises(
        ModelLoadError, match=r"LM Studio did not answer as LM Studio at 127\.0\.0\.1:9 .*`lms server start`"
    ):
        LmStudioBackend(PAIR, {"host": "127.0.0.1:9"})
    with pytest.raises(SpecdecUsageError, match=r"lmstudio host='127\.0\.0\.1:abc' is not HOST:PORT — fix"):
        LmStudioBackend(PAIR, {"host": "http://127.0.0.1:abc"})


def test_doctor_says_the_server_is_on_and_what_is_loaded(
    server: StandinServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LMSTUDIO_HOST", host(server))
    lines = server_findings()
    assert lines[0] == f"lmstudio 0.3.31 at {host(server)}: 1 model(s) loaded"
    assert lines[1].startswith(f"lmstudio: {TARGET} loaded — measure it with --specdec-model={TARGET}")
    monkeypatch.setenv("LMSTUDIO_HOST", "127.0.0.1:9")
    (line,) = server_findings()
    assert line.startswith("lmstudio: no server answered as LM Studio at 127.0.0.1:9")


def test_a_verdict_row_through_the_plugin(pytester: pytest.Pytester, server: StandinServer) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.speedup(max=1.0)
        def test_sd(specdec):
            specdec.compare(category="copy", max_tokens=8)
        """
    )
    result = pytester.runpytest(
        "--backend=lmstudio", f"--specdec-model={TARGET}", f"--specdec-draft={DRAFT}",
        f"--specdec-backend-option=host={host(server)}", "--specdec-min-trials=2", "--specdec-max-trials=2",
        "-p", "no:cacheprovider",
    )  # fmt: skip
    assert result.ret in (0, 1), result.stdout.str()[-3000:]  # the verdict is whatever was measured
    result.stdout.fnmatch_lines(["*lmstudio *copy*x [[]*2 *"])
    assert "not measurable" not in result.stdout.str()


def test_the_gate_takes_lmstudio_as_a_leg(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A leg whose server is LM Studio (here its stand-in, started by the leg's own serve command)."""
    command = [sys.executable, "-m", "pytest_specdec.backends.standin", "lmstudio", "--port", "{port}"]
    table = (
        f'[tool.specdec.gate.legs.lmstudio]\nserve = {json.dumps(command)}\nready = "/lmstudio-greeting"\n'
        'url-option = "host"\n'
    )
    (tmp_path / "pyproject.toml").write_text(table, encoding="utf-8")
    config = read_gate_config(tmp_path)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.speedup(min=1.0)
        def test_sd(specdec):
            specdec.compare(category="copy", max_tokens=8)
        """
    )
    with leg_server(config.leg("lmstudio"), tmp_path / "logs") as arguments:
        result = pytester.runpytest(
            "--backend=lmstudio", f"--specdec-model={TARGET}", f"--specdec-draft={DRAFT}", *arguments,
            "--specdec-min-trials=2", "--specdec-max-trials=2", "-p", "no:cacheprovider",
        )  # fmt: skip
    result.stdout.fnmatch_lines(["*lmstudio *copy*x [[]*2 *"])


FAKE_LMS = """#!{python}
import json, sys
from pathlib import Path
state = Path({state!r})
calls = state / "calls.jsonl"
with calls.open("a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
loaded = (state / "loaded").read_text().split() if (state / "loaded").exists() else []
args = sys.argv[1:]
if args == ["ps", "--json"]:
    print(json.dumps([{{"identifier": key, "modelKey": key}} for key in loaded]))
elif args[:1] == ["load"]:
    (state / "loaded").write_text(" ".join(loaded + [args[1]]))
    print("Model loaded successfully in 0.01s.", file=sys.stderr)
elif args[:1] == ["unload"]:
    (state / "loaded").write_text(" ".join(key for key in loaded if key != args[1]))
elif args == ["runtime", "survey", "--json"]:
    print(json.dumps({{"status": "ok", "engines": [
        {{"name": "mlx-llm-mac-arm64-apple-metal-advsimd", "version": "0.31.0", "supportedModelFormatNames": ["MLX"]}},
        {{"name": "llama.cpp-mac-arm64-apple-metal-advsimd", "version": "1.52.0", "supportedModelFormatNames": ["GGUF"]}},
    ]}}))
"""


def test_lms_loads_the_target_names_the_runtime_and_unloads_only_what_it_loaded(
    server: StandinServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lms = tmp_path / "bin" / "lms"
    lms.parent.mkdir()
    lms.write_text(FAKE_LMS.format(python=sys.executable, state=str(tmp_path)), encoding="utf-8")
    lms.chmod(0o755)
    monkeypatch.setenv("PATH", f"{lms.parent}:{os.environ['PATH']}")
    backend = LmStudioBackend(PAIR, {"host": host(server)})
    runtime = backend.fingerprint().details["engine_runtime"]
    backend.close()
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert ["load", TARGET, "-y"] in calls, "lms loads a target that was not loaded"
    assert calls[-2:] == [["unload", TARGET], ["ps", "--json"]], "and unloads it at the end, then looks"
    assert TARGET not in (tmp_path / "loaded").read_text()
    assert runtime == "llama.cpp-mac-arm64-apple-metal-advsimd 1.52.0", "the GGUF model's engine, as lms names it"
    (tmp_path / "calls.jsonl").unlink()
    (tmp_path / "loaded").write_text(TARGET)  # loaded by the user before the run: it stays loaded
    LmStudioBackend(PAIR, {"host": host(server)}).close()
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [c[0] for c in calls if c[0] in ("load", "unload")] == []
    with pytest.raises(SpecdecUsageError, match=r"lms='/nowhere/lms' is not a program here"):
        LmStudioBackend(PAIR, {"host": host(server), "lms": "/nowhere/lms"})
    (tmp_path / "calls.jsonl").unlink()
    # 0.0.0.0 reaches the stand-in on Linux but is no loopback name: as a server on another machine would be.
    elsewhere = LmStudioBackend(PAIR, {"host": host(server).replace("127.0.0.1", "0.0.0.0")})
    said = elsewhere.fingerprint().details["engine_runtime"]
    elsewhere.close()
    assert not (tmp_path / "calls.jsonl").exists(), "lms speaks to this machine's LM Studio: not used for another"
    assert said.startswith("not reported")


class NotLmStudio(BaseHTTPRequestHandler):
    """A web server that answers every path with a page (as a single-page-app server does)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>an app</html>")

    def log_message(self, *_: object) -> None:
        pass


def test_a_server_that_is_not_lm_studio_or_a_host_it_cannot_parse_is_one_line() -> None:
    other = ThreadingHTTPServer(("127.0.0.1", 0), NotLmStudio)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with pytest.raises(
            ModelLoadError, match=r"^LM Studio did not answer as LM Studio at 127\.0\.0\.1:\d+ \("
        ) as raised:
            LmStudioBackend(PAIR, {"host": f"127.0.0.1:{other.server_address[1]}"})
    finally:
        other.shutdown()
        other.server_close()
    assert "\n" not in str(raised.value)
    with pytest.raises(ModelLoadError, match=r"did not answer as LM Studio at \[::1:1234"):
        LmStudioBackend(PAIR, {"host": "[::1:1234"})
