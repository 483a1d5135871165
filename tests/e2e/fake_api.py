"""A scripted fake of the Anthropic Messages API, for driving the real Claude Code CLI offline.

The CLI in ``-p`` mode sends ``POST /v1/messages?beta=true`` once per model turn (streaming).
Each such "main" request (one whose ``tools`` include ``Bash``) consumes the next step of a script:

- :class:`Bash` (or a dict with a ``command`` key): one ``tool_use`` of the Bash tool,
- :class:`Tool`: a call of another tool (e.g. ``TaskStop``),
- a list/tuple of them: several parallel tool calls in one turn,
- :class:`Text` (or a plain ``str``): a final text answer (``end_turn``).

When the script is exhausted the server answers with the text ``"Done."``. Requests whose ``tools``
lack ``Bash`` (side requests such as title generation) get a short plain text answer and do not
consume a step; any other path gets ``200 {}``. Every request is recorded so a test can read back
the ``tool_result`` blocks the client sent (what each command printed, ``is_error``).

Standard library only.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

DONE_TEXT = "Done."
SIDE_TEXT = "Scripted session"


@dataclass(frozen=True)
class Bash:
    """One Bash tool call. ``None`` fields are left out of the tool input."""

    name = "Bash"
    command: str
    timeout: int | None = None  # milliseconds, as the real tool takes it
    run_in_background: bool | None = None
    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def tool_input(self) -> dict[str, Any]:
        data: dict[str, Any] = {"command": self.command}
        if self.description is not None:
            data["description"] = self.description
        if self.timeout is not None:
            data["timeout"] = self.timeout
        if self.run_in_background is not None:
            data["run_in_background"] = self.run_in_background
        data.update(self.extra)
        return data


@dataclass(frozen=True)
class Tool:
    """A call of any other tool by name (e.g. ``TaskStop``), with its input as given."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)

    def tool_input(self) -> dict[str, Any]:
        return dict(self.input)


@dataclass(frozen=True)
class Text:
    """A final text answer."""

    text: str


Call = Bash | Tool
Step = Bash | Tool | Text | str | dict[str, Any] | Sequence[Bash | Tool | dict[str, Any]]


def _normalise(step: Step) -> Text | list[Call]:
    if isinstance(step, Text):
        return step
    if isinstance(step, str):
        return Text(step)
    if isinstance(step, (Bash, Tool)):
        return [step]
    if isinstance(step, dict):
        return [_bash_from_dict(step)]
    calls = [s if isinstance(s, (Bash, Tool)) else _bash_from_dict(s) for s in step]
    if not calls:
        raise ValueError("an empty list of tool calls is not a step")
    return calls


def _bash_from_dict(data: dict[str, Any]) -> Bash:
    known = {"command", "timeout", "run_in_background", "description"}
    if "command" not in data:
        raise ValueError(f"a Bash step needs a 'command': {data!r}")
    return Bash(
        command=data["command"],
        timeout=data.get("timeout"),
        run_in_background=data.get("run_in_background"),
        description=data.get("description"),
        extra={k: v for k, v in data.items() if k not in known},
    )


@dataclass
class Recorded:
    """One request as the fake server saw it."""

    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it is not JSON
    kind: str  # "main" (consumed a step), "side" (no Bash tool), or "other"
    step: int | None  # index of the script step served, None when the script was exhausted or side


@dataclass(frozen=True)
class ToolResult:
    tool_use_id: str
    content: str  # text blocks joined
    is_error: bool
    tool_input: dict[str, Any] | None  # the matching tool_use input from the history, when found

    @property
    def command(self) -> str | None:
        return None if self.tool_input is None else self.tool_input.get("command")


def tool_results(body: dict[str, Any]) -> list[ToolResult]:
    """Every tool_result block in a Messages request body, in order, joined to its tool_use."""
    uses: dict[str, dict[str, Any]] = {}
    results: list[ToolResult] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                uses[block.get("id", "")] = block.get("input") or {}
            elif block.get("type") == "tool_result":
                tid = block.get("tool_use_id", "")
                results.append(
                    ToolResult(
                        tool_use_id=tid,
                        content=_text_of(block.get("content")),
                        is_error=bool(block.get("is_error", False)),
                        tool_input=uses.get(tid),
                    )
                )
    return results


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(block.get("text", ""))
    return "\n".join(parts)


def user_texts(body: dict[str, Any]) -> list[str]:
    """All text the client sent in user turns (prompts, hook reasons, system reminders)."""
    texts = []
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(
                b.get("text", "")
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
    return texts


class FakeAnthropic:
    """The server. Use as a context manager, or call :meth:`start` / :meth:`stop`."""

    def __init__(self, script: Iterable[Step] = (), *, model: str = "claude-sonnet-4-5") -> None:
        self._steps = [_normalise(s) for s in script]
        self._model = model
        self._lock = threading.Lock()
        self._cursor = 0
        self._ids = itertools.count(1)
        self._requests: list[Recorded] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeAnthropic:
        if self._server is not None:
            return self
        handler = _make_handler(self)
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("server not started")
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    # script ----------------------------------------------------------------------------------
    def extend(self, steps: Iterable[Step]) -> None:
        with self._lock:
            self._steps.extend(_normalise(s) for s in steps)

    @property
    def steps_served(self) -> int:
        with self._lock:
            return self._cursor

    @property
    def exhausted(self) -> bool:
        with self._lock:
            return self._cursor >= len(self._steps)

    def _next_step(self) -> tuple[int | None, Text | list[Call]]:
        with self._lock:
            if self._cursor >= len(self._steps):
                return None, Text(DONE_TEXT)
            index = self._cursor
            self._cursor += 1
            return index, self._steps[index]

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_fake{next(self._ids):06d}"

    # records ---------------------------------------------------------------------------------
    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self._requests.append(rec)

    @property
    def requests(self) -> list[Recorded]:
        """Every request received, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def main_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.kind == "main"]

    def tool_results(self) -> list[ToolResult]:
        """The session's tool results, read from the last main request (it carries the history)."""
        main = self.main_requests
        return tool_results(main[-1].body) if main else []

    # answers ---------------------------------------------------------------------------------
    def answer(self, body: Any) -> tuple[str, Text | list[Call], int | None]:
        """Choose the reply to a /v1/messages body: (kind, step, step index)."""
        tools = body.get("tools") if isinstance(body, dict) else None
        names = {t.get("name") for t in tools or [] if isinstance(t, dict)}
        if "Bash" not in names:
            return "side", Text(SIDE_TEXT), None
        index, step = self._next_step()
        return "main", step, index

    def message_events(self, step: Text | list[Call]) -> list[tuple[str, dict[str, Any]]]:
        """The SSE events of one assistant message."""
        msg_id = self._new_id("msg")
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "model": self._model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": 10,
                            "output_tokens": 1,
                            "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0,
                        },
                    },
                },
            )
        ]
        if isinstance(step, Text):
            events += [
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": step.text},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ]
            stop_reason = "end_turn"
        else:
            for i, call in enumerate(step):
                events += [
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {
                                "type": "tool_use",
                                "id": self._new_id("toolu"),
                                "name": call.name,
                                "input": {},
                            },
                        },
                    ),
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {
                                "type": "input_json_delta",
                                "partial_json": json.dumps(call.tool_input()),
                            },
                        },
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": i}),
                ]
            stop_reason = "tool_use"
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return events

    def message_json(self, step: Text | list[Call]) -> dict[str, Any]:
        """The same message as one non-streaming JSON body."""
        message: dict[str, Any] = {}
        content: list[dict[str, Any]] = []
        for name, data in self.message_events(step):
            if name == "message_start":
                message = dict(data["message"])
            elif name == "content_block_start":
                content.append(dict(data["content_block"]))
            elif name == "content_block_delta":
                delta = data["delta"]
                block = content[data["index"]]
                if delta["type"] == "text_delta":
                    block["text"] += delta["text"]
                else:
                    block["input"] = json.loads(delta["partial_json"])
            elif name == "message_delta":
                message.update(data["delta"])
        message["content"] = content
        return message


def _make_handler(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, the stream ends when the socket closes.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass

        def _read_body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            text = raw.decode("utf-8", "replace")
            try:
                return json.loads(text) if text else None
            except ValueError:
                return text

        def _send_json(self, status: int, data: Any) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            body = self._read_body() if self.command in ("POST", "PUT", "PATCH") else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            if not (self.command == "POST" and parts.path.rstrip("/") == "/v1/messages"):
                fake._record(
                    Recorded(self.command, parts.path, parts.query, headers, body, "other", None)
                )
                self._send_json(200, {})
                return
            kind, step, index = fake.answer(body)
            fake._record(
                Recorded(self.command, parts.path, parts.query, headers, body, kind, index)
            )
            stream = isinstance(body, dict) and bool(body.get("stream"))
            if not stream:
                self._send_json(200, fake.message_json(step))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for name, data in fake.message_events(step):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._handle()

        do_GET = do_POST  # noqa: N815
        do_PUT = do_POST  # noqa: N815
        do_PATCH = do_POST  # noqa: N815
        do_DELETE = do_POST  # noqa: N815
        do_HEAD = do_POST  # noqa: N815

    return Handler
