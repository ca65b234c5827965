"""The mlx-vlm server (``python -m mlx_vlm.server``): a plain server beside one with a drafter.

mlx-vlm chooses its drafter per server (``--draft-model``, ``--draft-kind`` ``dflash`` / ``eagle3`` / ``mtp``),
not per request, so each arm has its own server: started by the plugin (the target and
``--specdec-draft`` as the drafter; ``draft_kind=`` as given, else mlx-vlm's own choice), or two a
user started (``plain_url=``, ``sd_url=``). Both get the same greedy chat completion for the model the server
has loaded (another name would make it load that one instead). The drafter's block size is left to
the server (a ceiling it adapts each round), so the default arm is "upstream". Counts are the server's
own per-request ``timings.draft_n`` / ``draft_n_accepted`` (exact one request at a time, which is how
the plugin sends them): ``null`` means no speculative round ran. The release is the server's
(``/openapi.json`` ``info.version``); the kind is the SD server's ``draft_kind`` (``/v1/settings``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pytest_specdec.backends.base import (
    Arm,
    BackendOptions,
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    TokenBurst,
)
from pytest_specdec.backends.files import names_digest
from pytest_specdec.backends.http_client import HttpService, checked_url, get_or_refuse, text_units
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.backends.mlx_lm_parts import resolve_reference
from pytest_specdec.backends.server_process import ServerProcess
from pytest_specdec.errors import BackendRuntimeError, BackendUnavailable, ModelLoadError, SpecdecUsageError

KINDS = {"dflash": SpeculationKind.BLOCK_DRAFTER, "mtp": SpeculationKind.MTP_HEAD,
         "eagle3": SpeculationKind.DRAFT_MODEL}  # fmt: skip
LOAD_S = 900.0  # a server loads its model (and drafter) before /health answers


def _command(base: list[str], extra: list[str]) -> Callable[[int], list[str]]:
    """A server's command line on the port it is given."""
    return lambda port: [*base, "--port", str(port), *extra]


# The libraries under mlx-vlm that can move its answer on their own (MLX 0.32.0 → 0.32.2 moved DFlash2 from 1.47x to
# 1.71x with mlx-vlm unchanged: Blaizzy/mlx-vlm#2133), read from the interpreter that runs the servers.
LIBRARIES = ("mlx", "mlx-lm", "transformers")


def libraries_of(python: str, names: tuple[str, ...]) -> dict[str, str]:
    """``names``' installed versions in ``python``'s environment (a missing one left out; none if it cannot say)."""
    import json
    import subprocess

    ask = ("import importlib.metadata as m, json, sys\nfound = {}\nfor n in sys.argv[1:]:\n    try: found[n] = "
           "m.version(n)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(found))")  # fmt: skip
    try:
        done = subprocess.run([python, "-c", ask, *names], capture_output=True, text=True, timeout=60, check=True)
        found = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


class MlxVlmBackend:
    """Two mlx-vlm servers: one plain, one with a drafter."""

    name: ClassVar[str] = "mlx-vlm"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        reader = BackendOptions(self.name, options)
        plain_url, sd_url = reader.text("plain_url", ""), reader.text("sd_url", "")
        kind = reader.text("draft_kind", "")
        python = reader.text("python", sys.executable)
        self._timeout = reader.number("timeout", 300.0, low=0.1, high=86_400)
        self._stream = reader.flag("stream", True)
        reader.reject_unknown()
        if kind and kind not in KINDS:
            raise SpecdecUsageError(f"mlx-vlm draft_kind={kind!r} must be one of {', '.join(KINDS)} (or unset)")
        if bool(plain_url) != bool(sd_url):
            raise SpecdecUsageError(
                "mlx-vlm needs both plain_url= and sd_url= (a server without a drafter and one with it), or neither"
            )
        self._servers: list[ServerProcess] = []
        self._kinds_ran: set[str] = set()
        self._libraries: dict[str, str] = {}  # what runs under the servers it started (none known for the user's)
        try:
            self._connect(python, pair, kind, plain_url, sd_url)
        except BaseException:
            self.close()  # the servers it started are stopped, its connections closed
            raise

    def _connect(self, python: str, pair: ModelPair, kind: str, plain_url: str, sd_url: str) -> None:
        """The two servers (started here, or the user's), checked to make a pair, and the SD server's drafter seen
        drafting in one short completion."""
        if not plain_url:
            if not pair.draft:
                raise SpecdecUsageError("mlx-vlm's SD server needs a drafter: --specdec-draft=PATH_OR_HF_ID")
            plain_url, sd_url = self._start(python, pair, kind)
        checked_url(plain_url, "plain_url")
        checked_url(sd_url, "sd_url")
        fix = "start `python -m mlx_vlm.server`, or let the plugin start both (no plain_url=/sd_url=)"
        self._plain = HttpService("mlx-vlm (plain)", plain_url, self._timeout, fix)
        self._sd = HttpService("mlx-vlm (SD)", sd_url, self._timeout, fix)
        self._model = str(get_or_refuse(self._plain, "/health").get("loaded_model") or "")
        sd_model = str(get_or_refuse(self._sd, "/health").get("loaded_model") or "")
        if not self._model or self._model != sd_model:
            raise ModelLoadError(
                f"mlx-vlm's two servers must serve one loaded model (plain: {self._model or 'none'}, SD: "
                f"{sd_model or 'none'}) — start both with the same --model"
            )
        self._settings = {arm: self._current(http) for arm, http in (("plain", self._plain), ("sd", self._sd))}
        if self._settings["plain"].get("draft_model"):
            raise ModelLoadError(f"mlx-vlm's plain server at {plain_url} has a drafter loaded "
                                 f"({self._settings['plain']['draft_model']}) — start it without --draft-model")  # fmt: skip
        if not self._settings["sd"].get("draft_model"):
            raise ModelLoadError(f"mlx-vlm's SD server at {sd_url} has no drafter — start it with --draft-model")
        versions = {self._version(http) for http in (self._plain, self._sd)}
        if len(versions) > 1:
            raise ModelLoadError(f"mlx-vlm's two servers run different releases ({', '.join(sorted(versions))}) — "
                                 "start both from one install")  # fmt: skip
        self._release = f"mlx-vlm {versions.pop()}"
        self._pair = ModelPair(self._model, str(self._settings["sd"]["draft_model"]))
        self._kind = self._kind_seen()

    def _version(self, http: HttpService) -> str:  # the server's own word for its release
        info = get_or_refuse(http, "/openapi.json").get("info")
        return str(info.get("version", "unknown")) if isinstance(info, dict) else "unknown"

    def _kind_seen(self) -> str:
        """The drafter kind the SD server ran, from one short greedy completion (mlx-vlm resolves the kind from
        the drafter itself and may override the one asked for); a server that cannot complete is one line."""
        probe = GenerationRequest("1 2 3 4 5 6 7 8 9 10 11 12", Arm("sd", True, 0), 12)
        try:
            for _ in self.generate(probe):
                pass
        except BackendRuntimeError as error:
            raise ModelLoadError(
                f"{error} — its drafter cannot run with this model (docs/backends.md, mlx-vlm)"
            ) from None
        return next(iter(sorted(self._kinds_ran)), "")

    def _start(self, python: str, pair: ModelPair, kind: str) -> tuple[str, str]:
        """The two servers, as a user starts them (``python -m mlx_vlm.server``)."""
        target, draft = resolve_reference(pair.target), resolve_reference(str(pair.draft))
        base = [python, "-m", "mlx_vlm.server", "--model", target, "--host", "127.0.0.1"]
        drafter = ["--draft-model", draft, *(["--draft-kind", kind] if kind else [])]
        for label, extra in (("plain", []), ("sd", drafter)):
            server = ServerProcess(f"mlx-vlm-{label}", _command(base, extra), ready_timeout_s=LOAD_S)
            self._servers.append(server)
            try:
                server.start()
            except BackendUnavailable as error:
                raise ModelLoadError(f"{error} — check the model, the drafter and mlx-vlm's install") from None
        self._libraries = libraries_of(python, LIBRARIES)
        return self._servers[0].base_url, self._servers[1].base_url

    def _current(self, http: HttpService) -> dict[str, Any]:
        found = get_or_refuse(http, "/v1/settings").get("current")
        return found if isinstance(found, dict) else {}

    @property
    def pair(self) -> ModelPair:
        """The model the servers loaded, and the SD server's drafter."""
        return self._pair

    def adapts_draft_length(self) -> bool:
        """No block size is sent: the drafter's own, which it adapts each round, is what users get."""
        return True

    def speculation_kind(self) -> SpeculationKind:
        """The kind the SD server's drafter ran as (``timings.draft_kind``: ``dflash`` a block drafter, ``mtp`` the
        target's MTP head, ``eagle3`` a draft model, as llama-server's ``draft-eagle3`` is filed); before a
        speculative round was seen, the kind it was started with (mlx-vlm's own default: ``dflash``)."""
        said = self._kind or str(self._settings["sd"].get("draft_kind") or "dflash")
        return KINDS.get(said, SpeculationKind.BLOCK_DRAFTER)

    def fingerprint(self) -> Fingerprint:
        """The server's release, the drafter and its kind."""
        return Fingerprint(
            backend=self.name,
            release=self._release,
            versions={**self._libraries, "mlx-vlm": self._release.removeprefix("mlx-vlm ")},
            device=f"servers: {self._plain.base_url} (plain), {self._sd.base_url} (SD)",
            details={
                "draft_model": str(self._settings["sd"].get("draft_model")),
                "draft_kind": str(self._settings["sd"].get("draft_kind") or "auto"),
                "draft_kind_seen_at_start": self._kind or "none (no speculative round in the first completion)",
                "draft_kind_ran": ", ".join(sorted(self._kinds_ran)) or "none reported",
                "block_size": "the drafter's own (adaptive)",
            },
        )

    def model_digest(self) -> str:
        """The loaded model's and the drafter's names (the server reports no digest)."""
        return names_digest(self._pair)

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """One greedy chat completion on the arm's server; counts from its ``timings``."""
        http = self._sd if request.arm.speculative else self._plain
        body = {
            "model": self._model,
            "messages": [{"role": "user", "content": request.prompt}],
            "max_tokens": request.max_tokens,
            "temperature": 0.0,
            "seed": request.seed,
            "stream": self._stream,
            "stream_options": {"include_usage": True},
        }
        usage: dict[str, Any] | None = None
        timings: dict[str, Any] = {}
        for event in http.events("/v1/chat/completions", body, stream=self._stream):
            if "error" in event:
                raise BackendRuntimeError(f"{http.service} at {http.base_url} failed the completion: {event['error']}")
            for choice in event.get("choices") or []:
                text = str((choice.get("delta") or choice.get("message") or {}).get("content") or "")
                if text:
                    yield TokenBurst(text_units(text))
            if isinstance(event.get("usage"), dict):
                usage, timings = event["usage"], event.get("timings") or {}
        if usage is None or "completion_tokens" not in usage:
            raise BackendRuntimeError(f"{http.service} at {http.base_url} ended without 'usage' — no result kept")
        if timings.get("draft_kind"):
            self._kinds_ran.add(str(timings["draft_kind"]))
        return GenerationStats(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            drafted=int(timings.get("draft_n") or 0),  # null: no speculative round ran for this request
            accepted=int(timings.get("draft_n_accepted") or 0),
            generated_tokens=int(usage["completion_tokens"]),
            output_units="character",
        )

    def streams_refusal(self, streams: int) -> str | None:
        """No concurrency axis: the server's draft counts are shared by the requests that run together."""
        return (
            "mlx-vlm's draft counts are exact only one request at a time (they are the shared drafter's, "
            "speculative/common.py) — measure concurrency on llama-server"
        )

    def close(self) -> None:
        """Close the connections and stop any server the plugin started (also when it did not get far)."""
        for http in (getattr(self, "_plain", None), getattr(self, "_sd", None)):
            if http is not None:
                http.close()
        for server in self._servers:
            server.stop()
        self._servers = []
