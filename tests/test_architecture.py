"""The map: eight floors of wings, imports pointing down, and no heavy import at ``import pytest_specdec``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]


def room(module: str) -> str:
    """``pytest_specdec.store.ledger`` → ``store``; top-level modules are rooms of their own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def room_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("pytest_specdec")
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        if module == "pytest_specdec":
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != "pytest_specdec" and room(imported) != room(module):
                edges.setdefault(room(module), set()).add(room(imported))
        edges.setdefault(room(module), set())
    return edges


def test_the_import_depth_between_rooms_is_at_most_eight() -> None:
    edges = room_graph()

    @cache
    def depth(node: str) -> int:
        return 1 + max((depth(child) for child in edges[node]), default=0)

    assert max(depth(node) for node in edges) <= 8


def test_the_layers_contract_has_at_most_eight_floors_and_names_every_room() -> None:
    document = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c["layers"] for c in document["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    assert len(layers) <= 8
    named = {
        name.strip().removeprefix("pytest_specdec.") for layer in layers for name in layer.replace(":", "|").split("|")
    }
    assert set(room_graph()) - {"__init__", "py"} <= named


def test_importing_the_package_loads_no_runtime_or_plot_library() -> None:
    code = (
        "import sys, pytest_specdec; "
        "print(' '.join(m for m in ('mlx', 'llama_cpp', 'ollama', 'matplotlib', 'httpx', 'pydantic') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""


def test_the_shipped_benchmarks_folder_holds_only_what_users_run_with_pyargs() -> None:
    """The lab (studies, profiles) lives in the repository's ``studies/``, outside the wheel."""
    shipped = {path.name for path in (REPO / "pytest_specdec" / "benchmarks").glob("*.py")}
    assert shipped - {"__init__.py", "kit.py"}, "the claims are shipped"
    assert {name for name in shipped if not name.startswith("test_")} == {"__init__.py", "kit.py"}


def test_the_independence_contract_names_every_backend_folder() -> None:
    document = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (modules,) = [c["modules"] for c in document["tool"]["importlinter"]["contracts"] if c["type"] == "independence"]
    folders = {
        f"pytest_specdec.backends.{path.parent.name}"
        for path in (REPO / "pytest_specdec" / "backends").glob("*/adapter.py")
    }
    assert set(modules) == folders
