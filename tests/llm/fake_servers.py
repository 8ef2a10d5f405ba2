"""A local HTTP server that speaks the OpenAI Chat Completions and Anthropic
Messages wire formats, answering from a script, for driving the real SDKs."""
from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HWLOOP = (ROOT / "problems" / "gemmini-sim" / "gemm_hwloop.c").read_text()


def smart_answer(prompt: str) -> str:
    """What a competent model would answer: a plan naming an option it was shown, or a full kernel."""
    if "OPTION: <id" in prompt:
        menu = prompt.split("# Optimization menu", 1)[1].split("\n# ", 1)[0]
        option = re.search(r"^- ([\w.-]+): ", menu, re.M).group(1)
        return f"OPTION: {option}\nPLAN:\nHand the whole GEMM to gemmini_loop_ws in blocks that fit half the scratchpad."
    return f"Here is the kernel.\n```c\n{HWLOOP}```\n"


class FakeLLM:
    """script(prompt, n) -> (status, headers, body) where body is text for the answer, a dict to send as
    JSON, or bytes to send raw. n counts requests from 1."""

    def __init__(self, script=None, delay_s: float = 0.0, usage: tuple[int, int] = (1000, 200)) -> None:
        self.script = script or (lambda prompt, n: (200, {}, smart_answer(prompt)))
        self.delay_s = delay_s
        self.usage = usage
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                anthropic = self.path.endswith("/messages")
                content = body["messages"][0]["content"]
                prompt = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
                with fake.lock:
                    fake.requests.append({"path": self.path, "model": body.get("model"), "body": body,
                                          "headers": {k.lower(): v for k, v in self.headers.items()}})
                    n = len(fake.requests)
                time.sleep(fake.delay_s)
                status, headers, answer = fake.script(prompt, n)
                if isinstance(answer, str):
                    answer = fake._anthropic(body, answer, fake.usage) if anthropic else \
                        fake._openai(body, answer, fake.usage)
                raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def _openai(body: dict, text: str, usage: tuple[int, int]) -> dict:
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}

    @staticmethod
    def _anthropic(body: dict, text: str, usage: tuple[int, int]) -> dict:
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
