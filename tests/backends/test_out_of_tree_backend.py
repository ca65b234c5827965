"""A backend that lives outside the package: installed, it is picked up everywhere, with no edit of pytest_specdec.

``tests/thirdparty/specdec-openai-spec`` is a small package that registers an
OpenAI-compatible server with vLLM's speculative counters by entry point. It is
installed here with pip (``--target``) and every part of the plugin is asked about it:
``pytest --help``, ``pytest-specdec backends``, ``pytest-specdec standin``, a measured comparison with
its report, the gate's leg (its server started from the spec's serve recipe) and the
evidence family.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pytest_specdec.backends.server_process import free_port, pid_dir, reap_orphans

PACKAGE = Path(__file__).parents[1] / "thirdparty" / "specdec-openai-spec"
BIN = Path(sys.executable).parent
CLAIM = """
import pytest

@pytest.mark.speedup(max=50.0)
def test_sd_at_most_fifty(specdec):
    specdec.compare(category="copy")
"""
BUDGET = ["--specdec-min-trials=4", "--specdec-max-trials=4", "--specdec-max-tokens=8"]

pytest.importorskip("llama_cpp", reason="the stand-in's generations run on llama-cpp-python")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The package pip-installed into a folder of its own; the environment that sees it."""
    work = tmp_path_factory.mktemp("thirdparty")
    source = shutil.copytree(PACKAGE, work / "source")  # the build writes beside its sources
    target = work / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation",
         "--target", str(target), str(source)],
        check=True,
    )  # fmt: skip
    return {
        **os.environ,
        "PYTHONPATH": str(target),
        "PATH": f"{target / 'bin'}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPECDEC_GATE_STATE": str(work / "runner-state"),
    }


def run(arguments: list[str], environment: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(arguments, capture_output=True, text=True, env=environment, cwd=cwd, check=False, timeout=600)


def test_its_options_and_name_show_in_help_and_the_backend_list(installed: dict[str, str], tmp_path: Path) -> None:
    helped = run([str(BIN / "pytest"), "--help", "-p", "no:cacheprovider"], installed, tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "openai-spec" in helped.stdout
    assert "--specdec-openai-spec-url" in helped.stdout  # the option its spec gives a flag
    listed = run([str(BIN / "specdec"), "backends", "openai-spec"], installed, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "sd_model=" in listed.stdout
    assert "ships: stand-in, gate serve" in listed.stdout
    family = run([sys.executable, "-c", "from pytest_specdec.seed.evidence import backend_family as f; "
                  "print(f('openai-spec'))"], installed, tmp_path)  # fmt: skip
    assert family.stdout.strip() == "vllm"
    # A test that asks for the plugin: the option is checked then, before anything is measured.
    (tmp_path / "test_sd.py").write_text("def test_sd(specdec):\n    specdec.compare(category='code')\n")
    unknown = run([str(BIN / "pytest"), "--backend=openai-spec", "--specdec-backend-option=speculative=1"],
                  installed, tmp_path)  # fmt: skip
    assert unknown.returncode == 4
    assert "has no option 'speculative'" in unknown.stderr


@pytest.fixture
def standin(installed: dict[str, str]) -> Iterator[str]:
    """Its stand-in server, started by ``pytest-specdec standin``; its URL."""
    port = free_port()
    server = subprocess.Popen(
        [str(BIN / "specdec"), "standin", "openai-spec", "--port", str(port)],
        env=installed, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        assert "listening" in server.stdout.readline()  # printed once it serves
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_its_standin_serves_and_a_comparison_reports_it(
    installed: dict[str, str], standin: str, tmp_path: Path
) -> None:
    served = httpx.get(f"{standin}/v1/models").json()
    assert {m["id"] for m in served["data"]} == {"plain", "sd"}
    (tmp_path / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    done = run(
        [str(BIN / "pytest"), "test_claim.py", "-p", "no:cacheprovider", "--backend=openai-spec",
         f"--specdec-openai-spec-url={standin}", *BUDGET, "--specdec-json=out.json", "--specdec-report-md=out.md"],
        installed, tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    record = json.loads((tmp_path / "out.json").read_text())["comparisons"][0]
    assert record["backend"] == "openai-spec"
    assert record["release"] == "openai-spec 0.1.0"
    assert record["acceptance"] is not None  # drafts counted on the server's /metrics
    assert "openai-spec" in (tmp_path / "out.md").read_text()


def test_the_gate_starts_its_server_from_the_spec_and_measures_the_leg(
    installed: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        "[tool.specdec.gate.legs.openai-spec]\n"
        "required = true\n"
        "serve = true\n"
        'targets = ["test_claim.py"]\n'
        f'pytest-args = "{" ".join(BUDGET)}"\n',
        encoding="utf-8",
    )
    done = run(
        [str(BIN / "specdec"), "gate", "measure", "--backend", "openai-spec", "--out", "out"], installed, tmp_path
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    status = json.loads((tmp_path / "out" / "status.json").read_text())
    assert status["measurable"], status
    run_record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [c["backend"] for c in run_record["comparisons"]] == ["openai-spec"]
    assert list((tmp_path / "out" / "server-logs").glob("openai-spec-server*"))  # started by the gate, log kept


def test_declaring_a_draft_model_runs_claim_d_unchanged(
    installed: dict[str, str], standin: str, tmp_path: Path
) -> None:
    """Claims select by what a backend does: the package declares a draft model, so the shipped claim d measures
    it (and not claim c, which is about llama.cpp); doctor and gate init list it with what it lacks."""
    done = run(
        [str(BIN / "pytest"), "--pyargs", "pytest_specdec.benchmarks.test_claim_d_mlx_draft",
         "pytest_specdec.benchmarks.test_claim_c_llama_cpp", "-p", "no:cacheprovider", "-rs", "--backend=openai-spec",
         f"--specdec-openai-spec-url={standin}", *BUDGET, "--specdec-json=out.json"],
        installed, tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    records = json.loads((tmp_path / "out.json").read_text())["comparisons"]
    assert sorted(r["category"] for r in records) == ["code", "copy", "unpredictable"]
    assert {r["claim_id"] for r in records} == {"d"}
    assert "SKIPPED [4]" in done.stdout  # claim c's four categories, in one line
    assert "does not apply to --backend=openai-spec" in done.stdout
    doctor = run([str(BIN / "specdec"), "doctor"], installed, tmp_path)
    (line,) = [line for line in doctor.stdout.splitlines() if "openai-spec:" in line]
    assert line.startswith("optional: openai-spec: ")
    assert "no real model profile (seed or gemma) — no leg" in line
    assert line.endswith("SD kinds: draft model (runs claim d)")
    init = run([str(BIN / "specdec"), "gate", "init"], installed, tmp_path)
    assert f"# {line.removeprefix('optional: ')}" in init.stdout


def test_a_server_it_starts_through_the_plugins_helper_is_never_left_behind(
    installed: dict[str, str], tmp_path: Path
) -> None:
    """``serve=true`` starts its server with ``ServerProcess``: stopped when the run ends, and reaped by the next
    start when the run was killed (found by the identity in its pid file, never by its name)."""
    (tmp_path / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    command = [str(BIN / "pytest"), "test_claim.py", "-p", "no:cacheprovider", "--backend=openai-spec",
               "--specdec-backend-option=serve=true", *BUDGET]  # fmt: skip
    done = run(command, installed, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert not _served_by_the_helper(), "stopped when the run ended"
    killed = subprocess.Popen([*command, "--specdec-min-trials=400", "--specdec-max-trials=400"], env=installed,
                              cwd=tmp_path, stdout=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 300
    while not _served_by_the_helper() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)  # polling for the server's pid file, a condition (the run takes minutes to end)
    (server,) = _served_by_the_helper()
    killed.kill()
    killed.wait(timeout=60)
    assert _alive(server), "SIGKILL leaves the server running"
    assert server in reap_orphans(), "found by its pid file's identity"
    deadline = time.monotonic() + 30
    while _alive(server) and time.monotonic() < deadline:  # SIGKILL is delivered, not awaited, by the reaper
        time.sleep(0.05)
    assert not _alive(server)
    for stop in (signal.SIGTERM, signal.SIGINT):  # a CI cancel or `kill`, and Ctrl-C: the same teardown
        with _interruptible():
            ended = subprocess.Popen([*command, "--specdec-min-trials=400", "--specdec-max-trials=400"],
                                     env=installed, cwd=tmp_path, stdout=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 300
        while not _served_by_the_helper() and ended.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # polling for the server's pid file, as above
        (server,) = _served_by_the_helper()
        ended.send_signal(stop)
        assert ended.wait(timeout=120) == 2, f"{stop.name} interrupts the run (pytest's exit status 2), not kills it"
        assert not _alive(server), f"{stop.name} stops the server it started, without the reaper"


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Start a child as a terminal would, with Ctrl-C reaching it: a suite run in the background (``make test &``)
    ignores SIGINT, and a child inherits an ignored signal (POSIX's rule for background jobs), so its Python would
    never raise KeyboardInterrupt. A handler, unlike an ignored signal, is reset to the default at exec."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _served_by_the_helper() -> list[int]:
    """The pids of live openai-spec servers registered under the plugin's pid folder."""
    found = []
    for path in pid_dir().glob("*.json"):
        entry = json.loads(path.read_text(encoding="utf-8"))
        if entry["name"] == "openai-spec" and _alive(int(entry["pid"])):
            found.append(int(entry["pid"]))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
