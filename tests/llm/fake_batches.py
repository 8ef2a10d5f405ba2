"""The Batch APIs of OpenAI (files uploaded for a batch, batches made of them, output and error files) and Anthropic
(Message Batches and their results), as a fake provider (fake_servers.FakeLLM) serves them. Each request of a batch
is answered by the server's script like a direct request and billed with "-batch" after its API's name; a batch
says it is in progress for `polls` looks, then that it has ended. `expire` names custom_ids the batch expires
before running (not answered, not billed)."""
from __future__ import annotations

import json
import re
import threading
import time


class FakeBatches:
    def __init__(self, fake) -> None:
        self.fake = fake
        self.polls = 1
        self.expire: set[str] = set()
        self.files: dict[str, str] = {}
        self.batches: dict[str, dict] = {}
        self.looks: dict[str, int] = {}
        self.lock = threading.Lock()

    @staticmethod
    def owns(path: str) -> bool:
        return bool(re.search(r"/v1/(files|batches|messages/batches)(/|$|\?)", path))

    def post(self, path: str, raw: bytes, content_type: str) -> tuple:
        if path.endswith("/files"):
            text = _multipart_file(raw, content_type)
            file_id = self._new_file(text)
            return 200, {}, {"id": file_id, "object": "file", "bytes": len(text), "created_at": 0,
                             "filename": "requests.jsonl", "purpose": "batch", "status": "processed"}
        body = json.loads(raw or b"{}")
        if path.endswith("/messages/batches"):
            requests = [(r["custom_id"], r["params"]) for r in body["requests"]]
            return 200, {}, self._anthropic_batch(self._run("anthropic", "/v1/messages", requests))
        lines = [json.loads(line) for line in self.files[body["input_file_id"]].splitlines() if line.strip()]
        requests = [(line["custom_id"], line["body"]) for line in lines]
        return 200, {}, self._openai_batch(self._run("openai", body["endpoint"], requests), body)

    def get(self, path: str) -> tuple:
        m = re.search(r"/v1/files/([^/]+)/content", path)
        if m:
            return 200, {}, self.files[m.group(1)].encode()
        m = re.search(r"/v1/messages/batches/([^/?]+)(/results)?", path)
        if m and m.group(2):
            return 200, {}, "\n".join(json.dumps(r) for r in self.batches[m.group(1)]["results"]).encode()
        m = m or re.search(r"/v1/batches/([^/?]+)", path)
        batch_id = m.group(1)
        with self.lock:
            self.looks[batch_id] = self.looks.get(batch_id, 0) + 1
            ended = self.looks[batch_id] > self.polls
        batch = self.batches[batch_id]
        return 200, {}, batch["ended"] if ended else batch["running"]

    def _new_file(self, text: str) -> str:
        with self.lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = text
        return file_id

    def _run(self, api: str, path: str, requests: list[tuple[str, dict]]) -> list[tuple[str, int, object]]:
        """(custom_id, status, answer) of each request the batch runs (expired ones: status 0)."""
        out = []
        for custom_id, body in requests:
            if custom_id in self.expire:
                out.append((custom_id, 0, None))
                continue
            status, _, answer, _, _ = self.fake.respond(path, body, {}, api=f"{api}-batch")
            out.append((custom_id, status, answer))
        return out

    def _openai_batch(self, results: list, request: dict) -> dict:
        batch_id = f"batch_{len(self.batches) + 1}"
        def line(i, cid, status, answer):
            return json.dumps({"id": f"r{i}", "custom_id": cid, "error": None,
                               "response": {"status_code": status, "request_id": f"q{i}", "body": answer}})
        output = self._new_file("\n".join(line(i, *r) for i, r in enumerate(results) if r[1] == 200))
        errors = self._new_file("\n".join(line(i, *r) for i, r in enumerate(results) if r[1] not in (0, 200)))
        base = {"id": batch_id, "object": "batch", "endpoint": request["endpoint"], "input_file_id":
                request["input_file_id"], "completion_window": "24h", "created_at": int(time.time())}
        counts = {"total": len(results), "completed": sum(s == 200 for _, s, _ in results),
                  "failed": sum(s not in (0, 200) for _, s, _ in results)}
        expired = any(s == 0 for _, s, _ in results)
        running = {**base, "status": "in_progress", "request_counts": {"total": len(results), "completed": 0,
                                                                        "failed": 0}}
        ended = {**base, "status": "expired" if expired else "completed", "request_counts": counts,
                 "output_file_id": output, "error_file_id": errors}
        self.batches[batch_id] = {"running": running, "ended": ended}
        return running

    def _anthropic_batch(self, results: list) -> dict:
        batch_id = f"msgbatch_{len(self.batches) + 1}"
        lines = []
        for cid, status, answer in results:
            if status == 200:
                lines.append({"custom_id": cid, "result": {"type": "succeeded", "message": answer}})
            elif status == 0:
                lines.append({"custom_id": cid, "result": {"type": "expired"}})
            else:
                error = (answer or {}).get("error") if isinstance(answer, dict) else None
                lines.append({"custom_id": cid, "result": {"type": "errored", "error": {
                    "type": "error", "error": error or {"type": "api_error", "message": f"HTTP {status}"}}}})
        base = {"id": batch_id, "type": "message_batch", "created_at": "2026-11-28T00:00:00Z",
                "expires_at": "2026-11-29T00:00:00Z", "archived_at": None, "cancel_initiated_at": None}
        kinds = [line["result"]["type"] for line in lines]
        counts = {k: kinds.count(k) for k in ("succeeded", "errored", "canceled", "expired")}
        running = {**base, "processing_status": "in_progress", "ended_at": None, "results_url": None,
                   "request_counts": {"processing": len(lines), **{k: 0 for k in counts}}}
        url = f"{self.fake.url}/v1/messages/batches/{batch_id}/results"
        ended = {**base, "processing_status": "ended", "ended_at": "2026-11-28T00:01:00Z", "results_url": url,
                 "request_counts": {"processing": 0, **counts}}
        self.batches[batch_id] = {"running": running, "ended": ended, "results": lines}
        return running


def _multipart_file(raw: bytes, content_type: str) -> str:
    """The `file` part of a multipart/form-data upload."""
    boundary = re.search(r'boundary="?([^";]+)"?', content_type).group(1).encode()
    for part in raw.split(b"--" + boundary):
        head, _, content = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return content.rstrip(b"\r\n").decode()
    raise ValueError("no file in the upload")
