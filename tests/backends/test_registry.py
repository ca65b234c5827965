"""The lazy registry: built-ins, third-party entry points, clear errors."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

from pytest_specdec import backends
from pytest_specdec.backends.base import Backend, BackendSpec, ModelPair
from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError


@dataclass
class FakeEntryPoint:
    value: object

    def load(self) -> object:
        return self.value


def test_third_party_backend_is_found_through_the_entry_point_group(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = BackendSpec(name="thirdparty", target="pytest_specdec.backends.simulated.adapter:SimulatedBackend")

    def entry_points(group: str) -> list[FakeEntryPoint]:
        assert group == backends.ENTRY_POINT_GROUP
        return [FakeEntryPoint(spec), FakeEntryPoint("not a spec")]

    monkeypatch.setattr(backends.metadata, "entry_points", entry_points)
    assert "thirdparty" in backends.registered_backends()
    loaded = backends.load_backend("thirdparty", ModelPair("a", "b"), {})
    assert isinstance(loaded, Backend)
    assert loaded.pair == ModelPair("a", "b")


def test_missing_runtime_is_reported_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = BackendSpec(name="ghost", target="ghost:Ghost", requires=("ghost_runtime_xyz",), extra="ghost")
    assert backends.missing_runtime(spec) == "ghost_runtime_xyz"
    with pytest.raises(BackendUnavailable, match=r"pip install 'pytest-specdec\[ghost\]'"):
        backends.require_runtime(spec)


def test_unknown_backend_lists_choices() -> None:
    with pytest.raises(SpecdecUsageError, match=r"choose one of: .*mlx.*simulated"):
        backends.backend_spec("nope")


def test_importing_the_package_loads_no_runtime() -> None:
    code = "import sys, pytest_specdec; print(sorted(m for m in ('mlx', 'llama_cpp', 'ollama', 'matplotlib', 'httpx') if m in sys.modules))"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_backend_fixtures_load_once_or_skip_with_the_reason(pytester: pytest.Pytester) -> None:
    pytest.importorskip("llama_cpp")
    pytester.makepyfile(
        """
        def test_llama(llama_cpp_backend):
            assert llama_cpp_backend.name == "llama-cpp"
            assert llama_cpp_backend.pair.target == "embedded:target"

        def test_llama_again(llama_cpp_backend, request):
            assert llama_cpp_backend is request.getfixturevalue("llama_cpp_backend")

        def test_ollama(ollama_backend):
            raise AssertionError("no Ollama server here: the fixture must skip")

        def test_mtplx(mtplx_backend):
            raise AssertionError("no MTPLX server here: the fixture must skip")
        """
    )
    result = pytester.runpytest("--backend=simulated", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*backend 'ollama' cannot load its models here: *",
            "*backend 'mtplx' cannot load its models here: cannot reach MTPLX at http://127.0.0.1:8000*",
        ]
    )
