"""Stand-in for LM Studio's local server (a closed desktop app that cannot run here), as the ``lmstudio`` SDK
(PyPI, 1.5.0) talks to it. Paths below are inside that package; lines are of its 1.5.0 wheel.

* ``GET /lmstudio-greeting`` answers ``{"lmstudio": true}``: the probe ``Client`` runs on entering
  ``with`` (``json_api.py:2049-2066``, ``sync_api.py:1557-1605``).
* One websocket per namespace on the same port, ``ws://HOST/llm`` and ``ws://HOST/system``
  (``sync_api.py:461``); JSON in text frames. The first frame is the client's
  ``{"authVersion": 1, "clientIdentifier", "clientPasskey"}`` (``json_api.py:2076-2099``), answered
  ``{"success": true}`` (``_ws_impl.py:483-499``).
* ``channelCreate`` endpoint ``getOrLoad`` (``json_api.py:1064-1092``) for ``client.llm.model(key)``: a known
  key answers ``alreadyLoaded`` with ``info.identifier``, ``instanceReference`` and ``path``
  (``json_api.py:952-1012``); an unknown one a ``channelError`` whose ``displayData.code`` is
  ``generic.noModelMatchingQuery``, which the SDK raises as ``LMStudioModelNotFoundError``
  (``json_api.py:384-403``).
* ``channelCreate`` endpoint ``predict`` (``json_api.py:1277``, ``1314-1324``): the prompt is the history's
  user message (``complete`` overrides the template with a ``completeModeFormatting`` layer,
  ``_kv_config.py:492-523``); the config stack's fields carry ``llm.prediction.maxPredictedTokens``
  (``{"checked", "value"}``), ``llm.prediction.speculativeDecoding.draftModel`` and
  ``...numDraftTokensExact`` (``_kv_config.py:233-267``). The answers are ``fragment`` messages with
  ``content``, ``tokensCount``, ``containsDrafted``, ``reasoningType`` (all four required,
  ``_sdk_models/__init__.py:1253-1257``), then ``success`` with ``stats``, ``modelInfo``,
  ``loadModelConfig`` and ``predictionConfig`` (all four, or the SDK waits: ``json_api.py:1413-1447``);
  ``stats`` has ``stopReason`` and the draft counts ``totalDraftTokensCount``,
  ``acceptedDraftTokensCount``, ``rejectedDraftTokensCount``, ``ignoredDraftTokensCount`` and
  ``usedDraftModelKey`` (``_sdk_models/__init__.py:6694-6718``); ``modelInfo`` is an ``LlmInfo`` with its
  ``"type": "llm"`` tag (``_sdk_models/__init__.py:6592-6603``). A request without a draft model carries no
  draft counts.
* RPCs ``listLoaded`` (``sync_api.py:813-817``), ``getModelInfo`` → an ``LlmInstanceInfo`` (``sync_api.py:733-748``,
  ``_sdk_models/__init__.py:6626-6642``) and, on ``/system``, ``version`` → ``{version, build}``
  (``SystemRpcVersionReturns``, ``_sdk_models/__init__.py:3204-3208``).

Not in the SDK, so settings of the stand-in, each said as such: the engine behind a model (``engine``:
``llama.cpp`` serves a ``gguf`` model, ``mlx`` a ``safetensors`` one), LM Studio's release (``version``), the
draft length when a request sets none (``num_draft``, 3), and ``draft_ignored`` (the engine loads the draft
model and never drafts with it: what the adapter must see as "not engaged").
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from typing import Any, ClassVar

from pytest_specdec.backends.standin.engine import EngineStats, GenerationEngine, Piece
from pytest_specdec.backends.standin.http import StandinHandler

TARGET = "specdec-synthetic-target"
DRAFT = "specdec-synthetic-draft"
WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455, section 1.3
DRAFT_KEY = "llm.prediction.speculativeDecoding.draftModel"
DRAFT_LENGTH_KEY = "llm.prediction.speculativeDecoding.numDraftTokensExact"
MAX_TOKENS_KEY = "llm.prediction.maxPredictedTokens"


def config_fields(stack: object) -> dict[str, Any]:
    """The fields of a ``{"layers": [{"config": {"fields": [{key, value}]}}]}`` stack, later layers winning.

    >>> config_fields({"layers": [{"layerName": "apiOverride", "config": {"fields": [{"key": "a", "value": 1}]}}]})
    {'a': 1}
    """
    found: dict[str, Any] = {}
    for layer in (stack or {}).get("layers", []) if isinstance(stack, dict) else []:
        for item in (layer.get("config") or {}).get("fields", []):
            found[str(item["key"])] = item.get("value")
    return found


class LmStudioHandler(StandinHandler):
    """The greeting, and the websockets of the ``llm`` and ``system`` namespaces."""

    routes: ClassVar[dict[tuple[str, str], str]] = {
        ("GET", "/lmstudio-greeting"): "greeting",
        ("GET", "/llm"): "websocket",
        ("GET", "/system"): "websocket",
    }

    def greeting(self, _: object) -> None:
        """What the SDK's probe looks for."""
        self.send_json(200, {"lmstudio": True})

    @property
    def _engine_name(self) -> str:
        return self.server.settings.get("engine", "llama.cpp")

    def websocket(self, _: object) -> None:
        """Upgrade (RFC 6455's accept key), then answer each JSON frame until the client closes."""
        from wsproto import ConnectionType
        from wsproto.connection import Connection

        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        connection = Connection(ConnectionType.SERVER)
        self._socket = connection
        self._authenticated, self._partial = False, ""
        while True:
            try:
                data = self.connection.recv(65536)
                if not data:  # the client went away without a close frame: nothing to answer
                    return
                connection.receive_data(data)
                if self._events(connection):
                    return
            except OSError:
                return

    def _events(self, connection: Any) -> bool:
        """Answer the frames received so far; ``True`` once the client closed."""
        from wsproto.connection import ConnectionState
        from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage

        partial = self._partial
        for event in connection.events():
            if isinstance(event, Ping):
                self.connection.sendall(connection.send(event.response()))
            elif isinstance(event, CloseConnection):
                if connection.state is ConnectionState.REMOTE_CLOSING:
                    self.connection.sendall(connection.send(event.response()))
                return True
            elif isinstance(event, TextMessage | BytesMessage):  # JSON in text frames; bytes decoded alike
                data = event.data
                partial += data.decode("utf-8", errors="replace") if isinstance(data, bytes | bytearray) else data
                if not event.message_finished:
                    continue
                message, partial = json.loads(partial), ""
                if not self._authenticated:  # the auth frame comes first (_ws_impl.py:483-499)
                    self._authenticated = True
                    self._send({"success": True})
                else:
                    self.server.requests.append(("WS", self.path, message))
                    self._answer(message)
        self._partial = partial
        return False

    def _send(self, message: dict[str, Any]) -> None:
        from wsproto.events import TextMessage

        self.connection.sendall(self._socket.send(TextMessage(data=json.dumps(message))))

    def _answer(self, message: dict[str, Any]) -> None:
        kind, endpoint = message.get("type"), message.get("endpoint")
        if kind == "rpcCall":
            call = message.get("callId")
            if endpoint == "version":
                version = self.server.settings.get("version", "0.3.31")
                self._send({"type": "rpcResult", "callId": call, "result": {"version": version, "build": 1}})
            elif endpoint == "listLoaded":
                self._send({"type": "rpcResult", "callId": call, "result": [self._instance(TARGET)]})
            elif endpoint == "unloadModel":  # sync_api.py:819-823: a void result
                self._send({"type": "rpcResult", "callId": call})
            elif endpoint == "getModelInfo":
                query = ((message.get("parameter") or {}).get("specifier") or {}).get("query") or {}
                info = self._info(str(query.get("identifier", "")))
                self._send({"type": "rpcResult", "callId": call, "result": info | self._instance(info["modelKey"])
                            | {"contextLength": 1024}})  # fmt: skip
            else:
                self._send({"type": "rpcError", "callId": call, "error": {"title": f"unknown endpoint {endpoint}"}})
        elif kind == "channelCreate":
            channel = message.get("channelId")
            parameter = message.get("creationParameter") or {}
            if endpoint == "getOrLoad":
                self._get_or_load(channel, str(parameter.get("identifier", "")))
            elif endpoint == "predict":
                self._predict(channel, parameter)
            else:
                self._send({"type": "channelError", "channelId": channel, "error": {"title": f"no {endpoint}"}})

    def _instance(self, key: str) -> dict[str, str]:
        return {"identifier": key, "instanceReference": f"instance-{key}", "path": f"specdec/{key}"}

    def _not_found(self, channel: object, key: str) -> None:
        error = {"title": f"No model found that matches the query {key!r}",
                 "displayData": {"code": "generic.noModelMatchingQuery", "query": {"identifier": key}}}  # fmt: skip
        self._send({"type": "channelError", "channelId": channel, "error": error})

    def _get_or_load(self, channel: object, key: str) -> None:
        if key not in (TARGET, DRAFT):
            self._not_found(channel, key)
            return
        self._send({"type": "channelSend", "channelId": channel,
                    "message": {"type": "alreadyLoaded", "info": self._instance(key)}})  # fmt: skip

    def _predict(self, channel: object, parameter: dict[str, Any]) -> None:
        fields = config_fields(parameter.get("predictionConfigStack"))
        draft = fields.get(DRAFT_KEY)
        if draft is not None and draft != DRAFT:
            self._not_found(channel, str(draft))
            return
        messages = (parameter.get("history") or {}).get("messages") or []
        prompt = "".join(
            str(part.get("text", "")) for m in messages for part in m.get("content") or [] if part.get("type") == "text"
        )
        limit = fields.get(MAX_TOKENS_KEY) or {}
        max_tokens = int(limit.get("value", 64)) if isinstance(limit, dict) and limit.get("checked") else 64
        ignored = self.server.settings.get("draft_ignored") == "true"  # loaded, never drafted with: no counts
        drafting = draft is not None and not ignored
        num_draft = int(fields.get(DRAFT_LENGTH_KEY) or self.server.settings.get("num_draft", "3")) if drafting else 0
        for item in self._generate(prompt, max_tokens, num_draft):
            if isinstance(item, Piece):
                fragment = {"content": item.text, "tokensCount": 1, "containsDrafted": False, "reasoningType": "none"}
                self._send({"type": "channelSend", "channelId": channel,
                            "message": {"type": "fragment", "fragment": fragment}})  # fmt: skip
            else:
                self._send({"type": "channelSend", "channelId": channel,
                            "message": self._success(item, draft, drafting, max_tokens)})  # fmt: skip
        self._send({"type": "channelClose", "channelId": channel})

    def _generate(self, prompt: str, max_tokens: int, num_draft: int) -> Iterator[Piece | EngineStats]:
        engine: GenerationEngine = self.server.engine
        return engine.generate(prompt, max_tokens, num_draft, 0)

    def _success(self, stats: EngineStats, draft: object, drafting: bool, max_tokens: int) -> dict[str, Any]:
        decode_s = max(stats.decode_s, 1e-9)
        counted: dict[str, Any] = {
            "stopReason": "maxPredictedTokensReached" if stats.decode_tokens >= max_tokens else "eosFound",
            "tokensPerSecond": stats.decode_tokens / decode_s,
            "timeToFirstTokenSec": stats.prompt_s,
            "promptTokensCount": stats.prompt_tokens,
            "predictedTokensCount": stats.decode_tokens,
            "totalTokensCount": stats.prompt_tokens + stats.decode_tokens,
        }
        if drafting:  # the draft model drafted for this request: LM Studio's counts
            drafted, accepted = stats.drafted, stats.accepted
            counted |= {
                "usedDraftModelKey": str(draft),
                "totalDraftTokensCount": drafted,
                "acceptedDraftTokensCount": accepted,
                "rejectedDraftTokensCount": drafted - accepted,
                "ignoredDraftTokensCount": 0,
            }
        return {
            "type": "success",
            "stats": counted,
            "modelInfo": self._info(TARGET),
            "loadModelConfig": {"fields": []},
            "predictionConfig": {"fields": []},
        }

    def _info(self, key: str) -> dict[str, Any]:
        """An ``LlmInfo`` (``_sdk_models/__init__.py:6592-6603``); the engine decides the format."""
        gguf = self._engine_name == "llama.cpp"
        return {
            "type": "llm",
            "modelKey": key,
            "format": "gguf" if gguf else "safetensors",
            "displayName": "specdec synthetic target",
            "path": f"specdec/{TARGET}",
            "sizeBytes": int(self.server.engine.size_bytes),
            "vision": False,
            "trainedForToolUse": False,
            "maxContextLength": 1024,
        }
