"""A local HTTP server that speaks the OpenAI Chat Completions and Responses, the Anthropic Messages and the Gemini
generateContent and AWS Bedrock's Converse wire formats (and the Batch APIs: fake_batches.py), answering
from a script, for driving the real SDKs. It reports usage the way the providers do: prompt tokens (about 4
characters each), cached prompt tokens from a prefix cache that behaves like the provider's (OpenAI:
automatic, on prompt prefixes of at least 1024 tokens, in 128-token steps; Anthropic: only up to a
cache_control breakpoint, written on first use, read after), reasoning tokens, and finish reasons."""
from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.llm.fake_batches import FakeBatches

ROOT = Path(__file__).resolve().parents[2]
HWLOOP = (ROOT / "hw_runners" / "gemmini_sim" / "problems" / "gemm_hwloop.c").read_text()
CHARS_PER_TOKEN = 4


def tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass
class Reply:
    """A scripted answer with what the provider reports beside its text."""
    text: str
    finish: str = "stop"            # stop | length | refusal (Anthropic: end_turn | max_tokens | refusal)
    reasoning_tokens: int = 0       # billed as output tokens
    thinking: str = ""              # Anthropic thinking block / OpenAI-compatible reasoning_content
    pace_s: float = 0.0             # streamed: seconds between events (a long answer arriving piece by piece)


def anthropic_events(message: dict) -> bytes:
    """A Messages API answer as the stream of server-sent events the API sends for it (stream: true): the message
    with its input usage, each content block opened, filled by one delta and closed, then the stop reason with
    the output usage."""
    def event(kind: str, data: dict) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    out = [event("message_start", {"message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "thinking":
            empty, deltas = {"type": "thinking", "thinking": "", "signature": ""}, [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]}]
        else:
            empty, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]
        out.append(event("content_block_start", {"index": i, "content_block": empty}))
        out += [event("content_block_delta", {"index": i, "delta": d}) for d in deltas]
        out.append(event("content_block_stop", {"index": i}))
    out.append(event("message_delta", {"delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                       "usage": {"output_tokens": usage["output_tokens"]}}))
    out.append(event("message_stop", {}))
    return "".join(out).encode()


@dataclass
class Lost:
    """An answer the server generates and bills, then fails to deliver: "timeout" (it waits `seconds` before
    sending, past the client's timeout), "reset" (half the body, then a TCP reset), "malformed" (a body cut into
    invalid JSON, sent whole), "no-usage" (a 200 whose JSON has no usage block)."""
    how: str
    reply: "Reply | str"
    seconds: float = 3.0


def smart_answer(prompt: str) -> str:
    """What a competent model would answer: a plan naming an option it was shown, or a full kernel."""
    if "OPTION: <id" in prompt:
        menu = prompt.split("## Options offered in this step", 1)[1].split("\n## ", 1)[0]
        option = re.search(r"^(?:- |\d+\. )([\w.-]+): ", menu, re.M).group(1)
        return f"OPTION: {option}\nPLAN:\nHand the whole GEMM to gemmini_loop_ws in blocks that fit half the scratchpad."
    return f"Here is the kernel.\n```c\n{HWLOOP}```\n"


class PrefixCache:
    """Which prompt prefixes a provider has seen (no expiry: test runs are shorter than any TTL)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def openai(self, text: str) -> int:
        """Cached tokens of a prompt: the longest prefix seen before, of at least 1024 tokens, in 128-token steps."""
        step, first = 128 * CHARS_PER_TOKEN, 1024 * CHARS_PER_TOKEN
        bounds = list(range(first, len(text) + 1, step))
        with self.lock:
            hit = max((b for b in bounds if self._key(text[:b]) in self.seen), default=0)
            self.seen.update(self._key(text[:b]) for b in bounds)
        return hit // CHARS_PER_TOKEN

    def anthropic(self, prefix: str) -> tuple[int, int]:
        """(tokens read, tokens written) for a prompt whose cache breakpoint ends `prefix`."""
        if tokens(prefix) < 1024:
            return 0, 0
        with self.lock:
            key = "anthropic:" + self._key(prefix)
            if key in self.seen:
                return tokens(prefix), 0
            self.seen.add(key)
            return 0, tokens(prefix)


class FakeLLM:
    """script(prompt, n) -> (status, headers, answer): answer is text or a Reply for a normal answer, a dict to
    send as JSON, or bytes to send raw. n counts requests from 1. The prompt is all message text joined."""

    def __init__(self, script=None, delay_s: float = 0.0, usage: tuple[int, int] | None = (1000, 200),
                 models: list[str] | None = None) -> None:
        self.script = script or (lambda prompt, n: (200, {}, smart_answer(prompt)))
        self.delay_s = delay_s
        self.usage = usage           # fixed (prompt, completion) tokens; None: counted from the texts
        self.models = models         # what GET /v1/models lists (None: the listing is not implemented)
        self.cache = PrefixCache()
        self.requests: list[dict] = []
        # what the server billed, per answer: (path, model, prompt tokens incl. cached, output tokens, cached, written)
        self.billed: list[tuple[str, str, int, int, int, int]] = []
        self.current = threading.local()   # .body: the request being answered (for scripts)
        self.lock = threading.Lock()
        self.batches = FakeBatches(self)
        self.auto_tier = "default"   # the tier a request asking for "auto" is served at (the project's setting)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if fake.batches.owns(self.path):
                    return self._send(*fake.batches.get(self.path))
                if fake.models is None:
                    return self._send(404, {}, {"error": {"message": "not found"}})
                m = re.search(r"/v1(?:beta)?/models/([^?]+)", self.path)
                if m:   # Anthropic and Gemini look one model up
                    found = m.group(1) in fake.models
                    return self._send(200 if found else 404, {}, {"id": m.group(1), "type": "model",
                                                                  "name": f"models/{m.group(1)}"} if found
                                      else {"type": "error", "error": {"type": "not_found_error", "code": 404,
                                                                       "message": f"model: {m.group(1)}"}})
                return self._send(200, {}, {"object": "list", "data": [{"id": i, "object": "model", "created": 0,
                                                                       "owned_by": "x"} for i in fake.models]})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if fake.batches.owns(self.path):     # a batch's file or the batch itself (fake_batches.py)
                    return self._send(*fake.batches.post(self.path, raw, self.headers.get("Content-Type", "")))
                body = json.loads(raw or b"{}")
                status, headers, answer, pace, lost = fake.respond(self.path, body,
                                                                   {k.lower(): v for k, v in self.headers.items()})
                if lost:
                    return self._lose(lost, answer)
                self._send(status, headers, answer, pace)

            def _lose(self, lost, answer):
                raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                if lost.how == "no-usage" and isinstance(answer, dict):
                    return self._send(200, {}, {k: v for k, v in answer.items() if k != "usage"})
                if lost.how == "malformed":
                    return self._send(200, {}, raw[:len(raw) // 2])
                if lost.how == "timeout":
                    time.sleep(lost.seconds)
                    try:
                        self._send(200, {}, answer)
                    except OSError:        # the client gave up long ago
                        pass
                    return
                # reset: the headers promise the whole body, half of it comes, then the connection is torn down
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw[:len(raw) // 2])
                self.wfile.flush()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True

            def _send(self, status, headers, answer, pace_s=0.0):
                raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream" if raw.startswith(b"event:") else
                                 "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                for piece in raw.split(b"\n\n") if pace_s else [raw]:   # paced: one event at a time
                    self.wfile.write(piece + (b"\n\n" if pace_s else b""))
                    self.wfile.flush()
                    time.sleep(pace_s)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def respond(self, path: str, body: dict, headers: dict, api: str = "") -> tuple:
        """(status, headers, answer, pace_s, Lost or None) for one request to `path`, as the script says; a batch's
        requests come through here too, with their bills marked `api`."""
        anthropic = path.endswith("/messages")
        responses = path.endswith("/responses")
        gemini = ":generateContent" in path
        converse = path.endswith("/converse")
        prompt = self.prompt_text(body)
        with self.lock:
            self.requests.append({"path": path, "model": body.get("model"), "body": body, "headers": headers})
            n = len(self.requests)
        time.sleep(self.delay_s)
        self.current.body, self.current.api = body, api
        status, headers, answer = self.script(prompt, n)
        lost = answer if isinstance(answer, Lost) else None
        if lost:
            answer = lost.reply
        if isinstance(answer, str):
            answer = Reply(answer)
        pace = answer.pace_s if isinstance(answer, Reply) else 0.0
        if isinstance(answer, Reply):
            answer = self._anthropic(body, answer) if anthropic else self._converse(path, body, answer) if converse else \
                self._responses(body, answer) if responses else \
                self._gemini(path, body, answer) if gemini else self._openai(body, answer)
        if anthropic and body.get("stream") and isinstance(answer, dict) and answer.get("type") == "message":
            answer = anthropic_events(answer)     # streamed: server-sent events, as the API sends them
        return status, headers, answer, pace, lost

    @staticmethod
    def prompt_text(body: dict) -> str:
        if "input" in body:           # Responses: instructions, then the input
            return "\n".join(p for p in (body.get("instructions") or "", body["input"]) if p)
        if "contents" in body:        # Gemini: the system instruction, then the contents
            parts = (body.get("systemInstruction") or {}).get("parts", []) + \
                [p for c in body["contents"] for p in c.get("parts", [])]
            return "\n".join(p.get("text", "") for p in parts)
        parts = []
        system = body.get("system")
        if system:
            parts.append(system if isinstance(system, str) else "".join(b.get("text", "") for b in system))
        for message in body.get("messages", []):
            content = message["content"]
            parts.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))
        return "\n".join(parts)

    def _openai(self, body: dict, r: Reply) -> dict:
        prompt = "\n".join(m["content"] for m in body["messages"])
        tin, tout = self.usage or (tokens(prompt), tokens(r.text))
        tout += r.reasoning_tokens
        cached = min(tin, self.cache.openai(prompt))
        self._bill("openai", body, tin, tout, cached, 0)
        message = {"role": "assistant", "content": r.text if r.finish != "refusal" else None}
        if r.finish == "refusal":
            message["refusal"] = r.text
        if r.thinking:
            message["reasoning_content"] = r.thinking
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": message,
                             "finish_reason": {"refusal": "stop"}.get(r.finish, r.finish)}],
                "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout,
                          "prompt_tokens_details": {"cached_tokens": cached},
                          "completion_tokens_details": {"reasoning_tokens": r.reasoning_tokens}}}

    def _responses(self, body: dict, r: Reply) -> dict:
        """OpenAI's Responses API: a reasoning item with its summary (when asked for one), then the message; an
        answer cut off at max_output_tokens is "incomplete"."""
        prompt = self.prompt_text(body)
        tin, tout = self.usage or (tokens(prompt), tokens(r.text))
        tout += r.reasoning_tokens
        cached = min(tin, self.cache.openai(prompt))
        self._bill("openai", body, tin, tout, cached, 0)
        output = []
        if (body.get("reasoning") or {}).get("summary") and r.thinking:
            output.append({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": r.thinking}]})
        part = {"type": "refusal", "refusal": r.text} if r.finish == "refusal" else \
            {"type": "output_text", "text": r.text, "annotations": []}
        output.append({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [part]})
        cut = r.finish == "length"
        return {"id": "resp_1", "object": "response", "created_at": 0, "model": body["model"],
                "status": "incomplete" if cut else "completed",
                "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "output": output,
                "service_tier": self.auto_tier if body.get("service_tier") in (None, "auto") else body["service_tier"],
                "usage": {"input_tokens": tin, "input_tokens_details": {"cached_tokens": cached},
                          "output_tokens": tout, "output_tokens_details": {"reasoning_tokens": r.reasoning_tokens},
                          "total_tokens": tin + tout}}

    def _gemini(self, path: str, body: dict, r: Reply) -> dict:
        """Gemini's generateContent: thought summaries as parts marked `thought` (when asked for), output tokens
        billed as candidates plus thoughts, MAX_TOKENS for an answer cut off."""
        prompt = self.prompt_text(body)
        tin, tout = self.usage or (tokens(prompt), tokens(r.text))
        cached = min(tin, self.cache.openai(prompt))
        self._bill("gemini", {"model": re.search(r"models/([^/:]+):", path).group(1)}, tin, tout + r.reasoning_tokens,
                   cached, 0)
        config = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
        thinking = config.get("includeThoughts", config.get("include_thoughts"))   # the API reads either spelling
        parts = ([{"text": r.thinking, "thought": True}] if thinking and r.thinking else []) + [{"text": r.text}]
        finish = {"stop": "STOP", "length": "MAX_TOKENS", "refusal": "SAFETY"}.get(r.finish, "STOP")
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
                "usageMetadata": {"promptTokenCount": tin, "candidatesTokenCount": tout,
                                  "thoughtsTokenCount": r.reasoning_tokens, "cachedContentTokenCount": cached,
                                  "totalTokenCount": tin + tout + r.reasoning_tokens},
                "modelVersion": "fake"}

    def _anthropic(self, body: dict, r: Reply) -> dict:
        system = body.get("system") or []
        cached_prefix = "".join(b.get("text", "") for b in system) if any(b.get("cache_control") for b in system) \
            else ""
        read, written = self.cache.anthropic(cached_prefix) if cached_prefix else (0, 0)
        tin, tout = self.usage or (tokens(self.prompt_text(body)), tokens(r.text))
        tout += r.reasoning_tokens
        self._bill("anthropic", body, tin, tout, read, written)
        content = ([{"type": "thinking", "thinking": r.thinking, "signature": "sig"}] if r.thinking else []) + \
            [{"type": "text", "text": r.text}]
        stop = {"stop": "end_turn", "length": "max_tokens"}.get(r.finish, r.finish)
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"], "content": content,
                "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": max(0, tin - read - written), "output_tokens": tout,
                          "cache_creation_input_tokens": written, "cache_read_input_tokens": read}}

    def _converse(self, path: str, body: dict, r: Reply) -> dict:
        """AWS Bedrock's Converse: the prompt cached up to a cachePoint block, inputTokens counting only the
        uncached part, reasoning as a reasoningContent block."""
        system = body.get("system") or []
        cached_prefix = "".join(b.get("text", "") for b in system) if any("cachePoint" in b for b in system) else ""
        read, written = self.cache.anthropic(cached_prefix) if cached_prefix else (0, 0)
        tin, tout = self.usage or (tokens(self.prompt_text(body)), tokens(r.text))
        tout += r.reasoning_tokens
        model = re.search(r"/model/([^/]+)/converse", path).group(1).replace("%3A", ":")
        self._bill("bedrock", {"model": model}, tin, tout, read, written)
        content = ([{"reasoningContent": {"reasoningText": {"text": r.thinking, "signature": "s"}}}]
                   if r.thinking else []) + [{"text": r.text}]
        stop = {"stop": "end_turn", "length": "max_tokens", "refusal": "content_filtered"}.get(r.finish, r.finish)
        return {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
                "usage": {"inputTokens": max(0, tin - read - written), "outputTokens": tout,
                          "totalTokens": tin + tout, "cacheReadInputTokens": read, "cacheWriteInputTokens": written},
                "metrics": {"latencyMs": 1}}

    def _bill(self, api: str, body: dict, *usage: int) -> None:
        with self.lock:   # a batch's requests are billed as "openai-batch", "anthropic-batch" (at half price)
            self.billed.append((getattr(self.current, "api", "") or api, body.get("model", ""), *usage))

    def request_model(self) -> str:
        """The model named by the request a script is answering (in the script's thread)."""
        return self.current.body.get("model", "")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
