"""LM Studio's own command line, ``lms``, where it is installed: load and unload, and the engine's runtime release.

What each call relies on (lmstudio-ai/lms at 07b7252, ``@lmstudio/lms-cli`` 0.3.43):

* ``lms ps --json`` prints one JSON array of the loaded models, each with its ``identifier`` and ``modelKey``
  (``src/subcommands/list.ts``, lines 421-472).
* ``lms load KEY -y`` loads without prompting (``-y``: no picker when several models match;
  ``src/subcommands/load.ts``); its messages go to stderr, and a failure exits 1.
* ``lms unload IDENTIFIER`` exits 0 even when nothing has that identifier (``src/subcommands/unload.ts``,
  line 184): the identifier a load made is read from ``lms ps --json`` before and after it, and what is
  still loaded after the unload is read back the same way.
* ``lms runtime survey --json`` lists the selected engines with ``name``, ``version`` and
  ``supportedModelFormatNames`` (``src/subcommands/runtime/survey.ts``, lines 233-248); ``lms runtime ls`` has
  no JSON.

The SDK has no call for the engine's release. ``lms`` speaks to the LM Studio of this machine, so it is
used only for a server on this machine's loopback; either way a run leaves LM Studio with the models it
found loaded. Every call reads nothing from stdin and has a deadline; one that fails is one line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from pytest_specdec.errors import ModelLoadError

TIMEOUT_S = 600.0  # loading a large model can take minutes
FORMATS = {"gguf": "GGUF", "ggml": "GGML", "safetensors": "MLX", "mlx_placeholder": "MLX"}


@dataclass
class Lms:
    """``lms`` at ``program``; what it loaded for this run, to unload at the end."""

    program: str
    loaded_here: list[str] = field(default_factory=list)

    @classmethod
    def found(cls, program: str = "") -> Lms | None:
        """``lms`` as given, or on PATH; ``None`` where it is not installed."""
        path = shutil.which(program or "lms")
        return cls(path) if path else None

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``lms ARGS`` with no terminal to prompt on; one line when it cannot run or does not finish."""
        try:
            return subprocess.run([self.program, *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                                  check=False, stdin=subprocess.DEVNULL)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ModelLoadError(f"`lms {' '.join(args)}` did not run to its end ({error})") from None

    def _json(self, *args: str) -> Any:
        try:
            done = self._run(*args, "--json")
            return json.loads(done.stdout) if done.returncode == 0 else None
        except (ModelLoadError, ValueError):
            return None

    def loaded(self) -> list[str]:
        """The identifiers of the loaded models (``[]`` when ``lms ps`` does not answer)."""
        found = self._json("ps")
        return [str(m.get("identifier")) for m in found if isinstance(m, dict)] if isinstance(found, list) else []

    def ensure_loaded(self, key: str) -> None:
        """Load ``key`` unless it is loaded; the identifiers the load added are unloaded by :meth:`unload_ours`."""
        before = self.loaded()
        if key in before:
            return
        done = self._run("load", key, "-y")
        if done.returncode != 0:
            said = " ".join((done.stderr or done.stdout).split())[-300:]
            raise ModelLoadError(f"`lms load {key} -y` failed ({said}) — check the key with `lms ls`")
        self.loaded_here += [identifier for identifier in self.loaded() if identifier not in before]

    def unload_ours(self) -> None:
        """Unload what this run loaded (the models found loaded stay); one that stays loaded is said on stderr."""
        import sys

        ours, self.loaded_here = self.loaded_here, []
        for identifier in ours:
            try:
                self._run("unload", identifier)
            except ModelLoadError as error:
                sys.stderr.write(f"specdec: {error}\n")
        left = [identifier for identifier in ours if identifier in self.loaded()]
        if left:
            sys.stderr.write(f"specdec: lms did not unload {', '.join(left)} — `lms unload` them by hand\n")

    def runtime(self, model_format: str) -> str:
        """The selected engine for a model of ``model_format`` and its release (``llama.cpp-mac-arm64 1.52.0``),
        or why it is unknown."""
        survey = self._json("runtime", "survey")
        engines = survey.get("engines") if isinstance(survey, dict) else None
        wanted = FORMATS.get(model_format, model_format.upper())
        for engine in engines if isinstance(engines, list) else []:
            if isinstance(engine, dict) and wanted in (engine.get("supportedModelFormatNames") or []):
                return f"{engine.get('name')} {engine.get('version')}"
        return f"not reported (`lms runtime survey --json` names no engine for {wanted})"
