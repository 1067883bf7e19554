"""A scripted fake of three model APIs on 127.0.0.1, for driving the real agent CLIs.

One HTTP server speaks Anthropic Messages (``POST /v1/messages``, SSE; Claude Code), OpenAI
Responses (``POST /v1/responses``, SSE; Codex CLI with ``wire_api = "responses"``) and Gemini
(``:generateContent`` / ``:streamGenerateContent``; Gemini CLI). It plays the agent from a
script: each request of the agent's conversation (one that offers the agent its tools) takes
the script's next reply: a shell command to run, a text that ends the turn, or (Claude Code) a
subagent to start, whose own requests (its tools lack ``Agent``) take the script's subagent
replies. Requests without the agent's tools are the CLIs' side calls (titles, routing, quota
checks): they get a short answer (JSON of the schema they ask for) and leave the script alone.
Every request is logged, with its body, in order.

A runaway guard bounds every run: past ``limit`` conversation requests the server answers
with an HTTP error, which ends the CLI, so a hook that sends the agent back forever fails its
test instead of hanging it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import urlsplit


class Shell(NamedTuple):
    """A reply that calls the agent's shell tool with ``command``."""

    command: str


class Say(NamedTuple):
    """A reply that ends the turn with ``text``, after ``think`` seconds (the model's time)."""

    text: str
    think: float = 0.0


class Delegate(NamedTuple):
    """A reply that starts a subagent of ``agent_type`` with ``prompt`` (Claude Code's
    ``Agent`` tool), waiting for its answer."""

    prompt: str
    agent_type: str


Reply = Shell | Say | Delegate

# The shell tool each CLI offers its model, and the argument that holds the command.
SHELL_TOOLS = {"Bash": "command", "exec_command": "cmd", "shell": "command",
               "run_shell_command": "command"}
GIVE_UP = "I have nothing more to change."


AGENT = "agent"
SUBAGENT = "subagent"
SIDE = "side"


@dataclass
class Request:
    """One request a CLI made: when, what, and whose it was: the agent's conversation
    (``AGENT``), a subagent's (``SUBAGENT``), or a side call (``SIDE``, also every request
    that is not a model call)."""

    at: float
    method: str
    path: str
    body: Any
    role: str = SIDE
    reply: Reply | None = None

    def strings(self) -> Iterator[str]:
        """Every string in the body: what the model was told."""
        stack = [self.body]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                yield item
            elif isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)

    def says(self, text: str) -> bool:
        """Whether ``text`` is in one of the body's strings (as the CLI put it there,
        decoded from JSON; Codex CLI escapes ``<``, ``>`` and ``&`` in a hook's reason)."""
        escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return any(text in string or escaped in string for string in self.strings())


@dataclass
class Script:
    """The agent's replies, in order; after the last, ``then`` over and over (a cycle).
    ``subagent``: a subagent's replies, in order, then ``Say`` for every other request."""

    replies: Sequence[Reply]
    then: Sequence[Reply] = (Say(GIVE_UP),)
    subagent: Sequence[Reply] = ()
    limit: int = 16
    taken: int = 0
    taken_by_subagents: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self, role: str = AGENT) -> Reply | None:
        """The next reply for ``role``; None past the runaway limit."""
        with self.lock:
            if role == SUBAGENT:
                self.taken_by_subagents += 1
                if self.taken_by_subagents > self.limit:
                    return None
                if self.taken_by_subagents <= len(self.subagent):
                    return self.subagent[self.taken_by_subagents - 1]
                return Say("Nothing more to report.")
            self.taken += 1
            if self.taken > self.limit:
                return None
            if self.taken <= len(self.replies):
                return self.replies[self.taken - 1]
            return self.then[(self.taken - len(self.replies) - 1) % len(self.then)]


class FakeModels:
    """The server, on a free port of 127.0.0.1; ``requests`` logs every request."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeModels:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def log(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)

    def conversation(self, role: str = AGENT) -> list[Request]:
        """The requests of the agent's conversation (or its subagents'), in order."""
        with self.lock:
            return [r for r in self.requests if r.role == role]

    def dump(self) -> list[dict[str, Any]]:
        """Every request, as JSON-ready records (written beside a test's other logs)."""
        with self.lock:
            return [{"at": r.at, "method": r.method, "path": r.path, "role": r.role,
                     "reply": None if r.reply is None else [type(r.reply).__name__, *r.reply],
                     "body": r.body} for r in self.requests]


def _handler(models: FakeModels) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # every request is logged as data instead

        def do_HEAD(self) -> None:
            models.log(Request(time.time(), "HEAD", self.path, None))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            models.log(Request(time.time(), "GET", self.path, None))
            path = urlsplit(self.path).path
            if path.endswith("/models"):
                self.send_json({"data": [], "object": "list", "models": []})
            else:
                self.send_json({"error": {"message": f"no such thing: {path}"}}, 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            request = Request(time.time(), "POST", self.path, body)
            models.log(request)
            path = urlsplit(self.path).path
            if path.endswith("/messages/count_tokens"):
                self.send_json({"input_tokens": 10})
            elif path.endswith("/messages"):
                self.anthropic(request)
            elif path.endswith("/responses"):
                self.openai(request)
            elif ":countTokens" in path:
                self.send_json({"totalTokens": 10})
            elif ":generateContent" in path or ":streamGenerateContent" in path:
                self.gemini(request, stream=":streamGenerateContent" in path)
            else:
                self.send_json({"error": {"message": f"no such thing: {path}"}}, 404)

        # -- the three APIs ---------------------------------------------------------------

        def take(self, request: Request, tools: list[str]) -> Reply | None:
            """The script's next reply for a conversation request; a side call's answer.
            Claude Code's subagents are offered its tools but not ``Agent``."""
            if not any(name in SHELL_TOOLS for name in tools):
                return Say("OK")
            request.role = SUBAGENT if "Bash" in tools and "Agent" not in tools else AGENT
            request.reply = models.script.next(request.role)
            if isinstance(request.reply, Say):
                time.sleep(request.reply.think)
            return request.reply

        def refuse(self) -> None:
            self.send_json({"error": {"type": "invalid_request_error", "code": 400,
                                      "status": "INVALID_ARGUMENT",
                                      "message": "the scripted model's runaway limit"}}, 400)

        def anthropic(self, request: Request) -> None:
            body = request.body if isinstance(request.body, dict) else {}
            tools = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
            reply = self.take(request, tools)
            if reply is None:
                return self.refuse()
            model = body.get("model", "claude")
            if isinstance(reply, Shell | Delegate):
                if isinstance(reply, Shell):
                    name = "Bash"
                    arguments: dict[str, Any] = {"command": reply.command,
                                                 "description": "Run a command"}
                else:
                    name = "Agent"
                    arguments = {"description": "Look at the code", "prompt": reply.prompt,
                                 "subagent_type": reply.agent_type,
                                 "run_in_background": False}
                block: dict[str, Any] = {"type": "tool_use", "id": _id("toolu"), "name": name,
                                         "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": json.dumps(arguments)}]
                stop = "tool_use"
            else:
                block = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": reply.text}]
                stop = "end_turn"
            usage = {"input_tokens": 10, "output_tokens": 10}
            if not body.get("stream"):
                whole = dict(block)
                if isinstance(reply, Say):
                    whole["text"] = reply.text
                else:
                    whole["input"] = arguments
                return self.send_json({"id": _id("msg"), "type": "message", "role": "assistant",
                                       "model": model, "content": [whole],
                                       "stop_reason": stop, "usage": usage})
            events: list[tuple[str, dict[str, Any]]] = [
                ("message_start", {"type": "message_start", "message": {
                    "id": _id("msg"), "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": None, "usage": usage}}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": block}),
                *[("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": delta}) for delta in deltas],
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 10}}),
                ("message_stop", {"type": "message_stop"}),
            ]
            self.send_events(events)

        def openai(self, request: Request) -> None:
            body = request.body if isinstance(request.body, dict) else {}
            tools = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
            reply = self.take(request, tools)
            if reply is None:
                return self.refuse()
            response_id = _id("resp")
            if isinstance(reply, Delegate):
                raise NotImplementedError("subagents are scripted for Claude Code only")
            if isinstance(reply, Shell):
                name = next((t for t in tools if t in ("exec_command", "shell")), "shell")
                argument = SHELL_TOOLS[name]
                command: Any = reply.command if name == "exec_command" else [
                    "bash", "-lc", reply.command]
                item: dict[str, Any] = {"type": "function_call", "id": _id("fc"),
                                        "call_id": _id("call"), "name": name,
                                        "arguments": json.dumps({argument: command}),
                                        "status": "completed"}
            else:
                item = {"type": "message", "id": _id("msg"), "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": reply.text,
                                     "annotations": []}]}
            usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                     "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": 20}
            events: list[tuple[str, dict[str, Any]]] = [
                ("response.created", {"type": "response.created",
                                      "response": {"id": response_id, "status": "in_progress"}}),
                ("response.output_item.added", {"type": "response.output_item.added",
                                                "output_index": 0, "item": item}),
            ]
            if isinstance(reply, Say):
                events.append(("response.output_text.delta", {
                    "type": "response.output_text.delta", "item_id": item["id"],
                    "output_index": 0, "content_index": 0, "delta": reply.text}))
            events += [
                ("response.output_item.done", {"type": "response.output_item.done",
                                               "output_index": 0, "item": item}),
                ("response.completed", {"type": "response.completed", "response": {
                    "id": response_id, "status": "completed", "output": [item],
                    "usage": usage}}),
            ]
            self.send_events(events)

        def gemini(self, request: Request, *, stream: bool) -> None:
            body = request.body if isinstance(request.body, dict) else {}
            tools = [d.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)
                     for d in t.get("functionDeclarations") or [] if isinstance(d, dict)]
            reply = self.take(request, tools)
            if reply is None:
                return self.refuse()
            if isinstance(reply, Delegate):
                raise NotImplementedError("subagents are scripted for Claude Code only")
            if request.role == SIDE:
                part: dict[str, Any] = {"text": _side_answer(body)}
            elif isinstance(reply, Shell):
                part = {"functionCall": {"name": "run_shell_command",
                                         "args": {"command": reply.command}}}
            else:
                part = {"text": reply.text}
            chunk = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                     "finishReason": "STOP", "index": 0}],
                     "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10,
                                       "totalTokenCount": 20},
                     "modelVersion": "gemini-fake"}
            if stream:
                self.send_events([(None, chunk)])
            else:
                self.send_json(chunk)

        # -- the wire ---------------------------------------------------------------------

        def send_json(self, data: Any, status: int = 200) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def send_events(self, events: Sequence[tuple[str | None, Any]]) -> None:
            raw = b"".join(_event(name, data) for name, data in events)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


def _event(name: str | None, data: Any) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _side_answer(body: dict[str, Any]) -> str:
    """Gemini CLI's side calls (its model router, the next-speaker check) want JSON of the
    schema they send: a value of that schema, preferring the user's turn and the small
    model; anything else gets a word."""
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if config.get("responseMimeType") != "application/json" and not schema:
        return "OK"
    return json.dumps(_instance(schema or {}))


def _instance(schema: dict[str, Any]) -> Any:
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        choices = schema["enum"]
        return next((c for c in ("user", "flash", "simple") if c in choices), choices[0])
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: _instance(sub) for name, sub in properties.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "ok"


_counter = iter(range(1, 1 << 62))
_counter_lock = threading.Lock()


def _id(prefix: str) -> str:
    with _counter_lock:
        return f"{prefix}_{next(_counter):08d}"

