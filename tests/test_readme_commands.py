"""The README's commands, as a Mac owner copies them, against a wheel built from this checkout.

The wheel is built here and installed into a fresh virtual environment. That environment
reaches no package index: the dependencies come from the environment running this test
(one path line), never ``pytest_specdec`` itself, which comes only from the wheel. The
commands are read from the README's marked blocks and run as written; the only stand-ins
are the ones this machine forces: ``pip install "pytest-specdec[…]"`` installs the built
wheel, and the Ollama lines run against the Ollama stand-in (``OLLAMA_HOST``), with the
README's tag replaced by one the stand-in serves (no ``ollama pull`` here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from wheel_env import REPO, run_line, wheel_venv

from pytest_specdec.backends.ollama.standin import OllamaHandler
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer

# The "in words" column's phrases (render/report.py in_words).
PLAIN_WORDS = re.compile(
    r"SD pays off here|SD does not pay off here|can't tell yet|SD breaks even here|SD never engaged|SD changed the output"
)


def readme_block(marker: str) -> list[str]:
    """The commands of the fenced block after ``<!-- marker``, continuation lines joined, comments dropped."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    after = text[text.index(f"<!-- {marker}") :]
    block = after.split("```", 2)[1]
    joined = block.replace("\\\n", " ")
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel built from this checkout; returns its bin folder."""
    return wheel_venv(tmp_path_factory.mktemp("readme"))


def test_the_package_is_the_wheels(installed: Path, tmp_path: Path) -> None:
    found = run_line("python -c 'import pytest_specdec.benchmarks as b; print(b.__file__)'", installed, tmp_path)
    assert str(installed.parent) in found.stdout, "pytest_specdec comes from the wheel, not the checkout"


def test_the_install_block_gives_a_verdict_in_plain_words(installed: Path, tmp_path: Path) -> None:
    lines = readme_block("readme-try")
    assert lines[1].startswith('pip install "pytest-specdec[mlx]"'), "the README installs the package first"
    ran = 0
    for line in lines[2:]:  # the venv and the pip line are what the fixture did with the wheel
        done = run_line(line, installed, tmp_path, COLUMNS="80")  # a newcomer's default terminal
        assert done.returncode in (0, 1), f"{line}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        if line.startswith("pytest-specdec doctor"):  # the command that cannot clash with PyPI's specdec
            assert done.stdout.startswith("python 3.")
        elif line.startswith("pytest "):  # at 80 columns the words wrap inside their column: read them joined
            assert PLAIN_WORDS.search(" ".join(done.stdout.split())), done.stdout[-3000:]
            (candidates,) = (tmp_path / "baselines" / "candidates").glob("*/mlx.json")
            keys = json.loads(candidates.read_text(encoding="utf-8"))["entries"]
            assert keys, candidates
            assert all(k.startswith("benchmarks/test_claim_d_mlx_draft.py::") for k in keys), "keyed as from a clone"
            first_look_says_what_it_measured(done.stdout.splitlines())
        ran += 1
    assert ran == 2


def first_look_says_what_it_measured(lines: list[str]) -> None:
    """At 80 columns: every embedded row of the table is labelled a self-test, and the last line before pytest's
    summary is the answer a newcomer needs next (how to ask for their own model)."""
    ours = [line for line in lines if not line.startswith(("benchmark: ", "plugins: ", "  specdec ", "    specdec "))]
    assert [line for line in ours if len(line) > 80] == []
    start = next(i for i, line in enumerate(lines) if "specdec verdicts" in line) + 1
    end = next(i for i, line in enumerate(lines) if re.match(r"=+ .* in [\d.]+s", line))
    table = lines[start:end]
    rows = [line for line in table[2:] if re.match(r"(code|copy|prose|unpredictable)\b", line)]
    assert len(rows) == 3, table
    assert all("self-test (synthetic" in line for line in rows), "each synthetic row says so on its first line"
    last = " ".join(
        line.strip() for line in table[next(i for i, t in enumerate(table) if t.startswith("self-test:")) :]
    )
    assert last.startswith("self-test: the tool works here"), table[-4:]
    assert "--specdec-model YOUR_MODEL" in last


@pytest.fixture
def ollama_standin() -> Iterator[StandinServer]:
    engine = GenerationEngine()
    server = StandinServer(OllamaHandler, engine).start()
    yield server
    server.stop()
    engine.close()


def test_the_ollama_lines_give_a_verdict_in_plain_words(
    installed: Path, tmp_path: Path, ollama_standin: StandinServer
) -> None:
    lines = readme_block("readme-per-backend")
    (pull,) = [line for line in lines if line.startswith("ollama ")]
    (measure,) = [line for line in lines if "--backend=ollama" in line]
    tag = pull.split()[-1]
    assert pull == f"ollama pull {tag}"
    done = run_line(measure.replace(tag, "specdec-synthetic:mtp"), installed, tmp_path, OLLAMA_HOST=ollama_standin.url)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]
    assert PLAIN_WORDS.search(done.stdout), done.stdout[-3000:]


def test_the_readme_links_its_write_up_and_says_each_term_before_using_it(installed: Path) -> None:
    """The write-up ships with the package; the published M1 Max figures are marked published; each term is
    explained at its first use."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "[`pytest_specdec/seed/write-up.md`](pytest_specdec/seed/write-up.md)" in text
    shipped = subprocess.run(
        [str(installed / "python"), "-c", "import importlib.resources as r; "
         "print(r.files('pytest_specdec').joinpath('seed/write-up.md').read_text()[:60])"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "Speculative Decoding on Apple silicon" in shipped, "the wheel carries the write-up"
    m1 = next(line for line in text.splitlines() if line.startswith("| Apple M1 Max"))
    assert "**published**" in m1
    for term, word in (("**γ**", "γ"), ("**the embedded default**", "embedded default"), ("a **profile**", "profile"),
                       ("a **machine class**", "machine class"), ("a **reference**", "reference"),
                       ("a **leg**", "leg"), ("a **stand-in**", "stand-in")):  # fmt: skip
        defined = text.index(term)
        first = re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text)
        assert first is not None
        assert first.start() >= defined - len(term), f"{word!r} is used before it is explained"


def test_the_clone_block_installs_this_checkout_before_the_first_release(tmp_path: Path) -> None:
    """The clone block as written, but the clone from this checkout (the address is the release's to fill in) and the
    dependencies from this environment (no package index here): the package itself is built from the clone."""
    clone, venv, pip = readme_block("readme-clone")
    url = clone.split()[2]
    assert re.fullmatch(r"https://github\.com/OWNER/pytest-specdec\.git", url), "only the owner is a placeholder"
    assert clone.endswith("&& cd pytest-specdec")
    assert venv == "python3.12 -m venv ~/.venvs/specdec && . ~/.venvs/specdec/bin/activate"
    assert pip == 'pip install ".[mlx]"'
    home = tmp_path / "home"
    home.mkdir()
    site = sysconfig.get_paths()["purelib"]
    python = sys.executable  # the README's python3.12 where this machine has another
    origin = tmp_path / "origin" / "pytest-specdec.git"  # the clone's name comes from the address, as from GitHub's
    origin.parent.mkdir()
    origin.symlink_to(REPO)
    script = " && ".join(
        [clone.replace(url, str(origin)), venv.replace("python3.12", python),
         f"echo {site} > $(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')/deps.pth",
         "python -m pip uninstall -y -q setuptools 2>/dev/null || true",  # a 3.11 venv's own, older than the build's
         pip.replace("pip install", "pip install -q --no-deps --no-build-isolation --no-index"),
         "cd ~ && python -c 'import pytest_specdec, sys; print(pytest_specdec.__file__, sys.prefix)'"]
    )  # fmt: skip
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env={**os.environ, "HOME": str(home)},
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    where, prefix = done.stdout.split()
    assert prefix == str(home / ".venvs" / "specdec")
    assert where.startswith(prefix), "the package is the clone's, installed into the README's venv"
    assert (tmp_path / "pytest-specdec" / "pyproject.toml").is_file()


def fenced(marker: str) -> str:
    """The fenced block after ``<!-- marker``, as written (its language line dropped)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text[text.index(f"<!-- {marker}") :].split("```", 2)[1].split("\n", 1)[1]


def test_the_scoreboard_command_builds_the_site_from_the_baselines(installed: Path, tmp_path: Path) -> None:
    (line,) = readme_block("readme-site")
    shutil.copytree(REPO / "baselines", tmp_path / "baselines")
    done = run_line(line, installed, tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "NVIDIA-H200" in index, "this repository's own baselines on the front page"


def test_the_first_example_is_a_test_that_runs_as_written(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "test_first.py").write_text(fenced("readme-first"), encoding="utf-8")
    done = run_line("pytest test_first.py --backend=simulated -p no:cacheprovider", installed, tmp_path)
    assert done.returncode in (0, 1), done.stdout[-3000:]  # the claim may fail: it is measured, not assumed
    verdict = r"test_mlx_draft \(SD ≤ 1\.3x\): (holds|refuted|inconclusive) on code"  # its line under the table
    assert re.search(verdict, done.stdout), done.stdout[-3000:]


def test_the_sampled_end_to_end_example_runs_as_written(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "test_as_i_run_it.py").write_text(fenced("readme-sampled"), encoding="utf-8")
    done = run_line("pytest test_as_i_run_it.py --backend=simulated -p no:cacheprovider", installed, tmp_path)
    assert done.returncode in (0, 1), done.stdout[-3000:]  # the claim may fail: it is measured, not assumed
    assert "T=0.7" in done.stdout
    assert "end-to-end" in done.stdout


def measured_row_command() -> str:
    """The command of the first row of "What it has measured so far" (its first backticked ``pytest`` part)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    rows = [line for line in text[text.index("<!-- readme-measured") :].splitlines() if line.startswith("| this repo")]
    return next(part for part in rows[0].split("`") if part.startswith("pytest "))


@pytest.mark.slow
def test_the_first_measured_row_runs_as_written_and_prints_its_figure(installed: Path, tmp_path: Path) -> None:
    """Gemma 3 270M on the real llama-server, in a copy of the checkout's claims and configuration (its history
    goes to the copy's baselines/, never this checkout's)."""
    line = measured_row_command()
    shutil.copytree(REPO / "benchmarks", tmp_path / "benchmarks")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    done = run_line(line, installed, tmp_path)
    assert done.returncode == 0, line + "\n" + done.stdout[-4000:]
    assert re.search(r"1 passed, 3 deselected", done.stdout), done.stdout[-2000:]
    row = r"^llama-server .* copy .*\d+\.\d\dx \[\d+\.\d\d, \d+\.\d\d\]"  # the figure the row quotes, as printed
    assert re.search(row, done.stdout, re.M), done.stdout[-3000:]


@pytest.mark.slow
def test_the_context_sweep_block_runs_as_written_and_says_where_sd_pays_off(installed: Path, tmp_path: Path) -> None:
    """About 10 minutes here: Gemma 3 270M on the real llama-server behind 0, 2K and 8K tokens of context."""
    (line,) = readme_block("readme-context")
    done = run_line(line, installed, tmp_path)
    assert done.returncode == 0, done.stdout[-4000:]
    said = " ".join(done.stdout.split())  # the sweep's summary, its lines joined
    assert re.search(r"ctx=0 \(\d+–\d+ prompt tokens\) decode \d+\.\d\dx \[", said), done.stdout[-4000:]
    assert re.search(r"ctx=8K \(\d+–\d+ prompt tokens\) decode \d+\.\d\dx \[", said)
    assert (tmp_path / "context.png").is_file()
