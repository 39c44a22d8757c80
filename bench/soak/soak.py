#!/usr/bin/env python3
"""Soak: `headroom serve` under mixed load for a long time, watching its resident memory and
counting every request's answer.

Clients loop over a mix: whole and streamed completions and chat (some with a JSON schema),
streams cancelled by closing the connection part-way, requests cut off before their body, and
bad requests of every kind (invalid JSON, deep nesting, wrong field types, oversized bodies,
prompts past the context, unknown routes). Every request must get the answer its kind calls for:
complete text with a finish_reason ([DONE] for streams), or the expected error status. A request
without one is lost. The server's own counters must equal the clients'.

The server's VmRSS is sampled every few seconds; after the warm-up it must stay within a bound
(the pass/fail line says which).

Usage: bench/soak/soak.py [--binary build/apps/headroom/headroom] [--minutes 10] [--clients 12]
                          [--warmup 60] [--rss-bound-mib 16] [--json out.json]
                          [--server-log soak-server.log] [-- serve flags]
"""
import argparse
import http.client
import json
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "integration"))
from serve import metrics, start_server  # noqa: E402

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went to the park", "One day, a bird",
           "Tom had a red ball", "The sun was hot"]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Client:
    """One client thread's requests; each returns (ok, detail)."""

    def __init__(self, port, rng):
        self.port, self.rng = port, rng

    def post(self, path, body, stream=False, raw=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            data = raw if raw is not None else json.dumps(body)
            conn.request("POST", path, data, {"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read().decode(errors="replace")
        finally:
            conn.close()

    def completion(self, stream):
        chat = self.rng.random() < 0.4
        body = {"max_tokens": self.rng.randint(8, 160), "temperature": self.rng.choice([0, 0.8]), "stream": stream}
        if chat:
            body["messages"] = [{"role": "user", "content": self.rng.choice(PROMPTS)}]
            if self.rng.random() < 0.25:
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
                body["max_tokens"] = 200
        else:
            body["prompt"] = self.rng.choice(PROMPTS)
        status, text = self.post("/v1/chat/completions" if chat else "/v1/completions", body)
        if status != 200:
            return False, f"status {status}: {text[:200]}"
        if stream:
            events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
            if not events or events[-1] != "[DONE]":
                return False, f"stream without [DONE]: {events[-2:]}"
            finish = [json.loads(e)["choices"][0]["finish_reason"] for e in events[:-1] if json.loads(e)["choices"]]
            return finish[-1] in ("stop", "length"), f"finish {finish[-1]}"
        doc = json.loads(text)
        return doc["choices"][0]["finish_reason"] in ("stop", "length"), "whole"

    def cancel(self):
        """A stream abandoned after a few events: the connection is closed."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        try:
            body = json.dumps({"prompt": self.rng.choice(PROMPTS), "max_tokens": 400, "stream": True})
            s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
            seen = b""
            while seen.count(b"data: ") < self.rng.randint(1, 5):
                chunk = s.recv(4096)
                if not chunk:
                    return False, "closed before the stream began"
                seen += chunk
            return seen.startswith(b"HTTP/1.1 200"), "cancelled"
        finally:
            s.close()

    def cut_short(self):
        """A request whose body never comes: the client leaves after the head."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: soak\r\nContent-Length: 500\r\n\r\n{\"prompt\":")
        s.close()
        return True, "left"

    def bad(self):
        kind = self.rng.choice(["json", "deep", "type", "large", "context", "route", "utf8"])
        if kind == "route":
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            conn.request("GET", "/v2/nothing")
            status = conn.getresponse().status
            conn.close()
            return status == 404, kind
        raw = {"json": "{not json", "deep": '{"prompt":"x","a":' + "[" * 500 + "]" * 500 + "}",
               "utf8": b'{"prompt":"\xff"}', "large": '{"prompt":"' + "x" * (5 << 20) + '"}'}.get(kind)
        body = {"type": {"prompt": "x", "max_tokens": "ten"}, "context": {"prompt": "a " * 3000}}.get(kind)
        try:
            status, _ = self.post("/v1/completions", body, raw=raw)
        except (BrokenPipeError, ConnectionResetError):
            return kind == "large", kind  # a 413 may close before the whole body is written
        want = 413 if kind == "large" else 400
        return status == want, f"{kind}: {status}"


def worker(port, seed, stop, tally, lock, failures):
    client = Client(port, random.Random(seed))
    kinds = [("stream", 30), ("whole", 30), ("cancel", 12), ("cut", 4), ("bad", 24)]
    while not stop.is_set():
        kind = client.rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
        try:
            ok, detail = {"stream": lambda: client.completion(True), "whole": lambda: client.completion(False),
                          "cancel": client.cancel, "cut": client.cut_short, "bad": client.bad}[kind]()
        except Exception as e:  # a broken connection is a lost request
            ok, detail = False, f"{type(e).__name__}: {e}"
        with lock:
            tally[kind] = tally.get(kind, 0) + 1
            if not ok:
                failures.append(f"{kind}: {detail}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/apps/headroom/headroom")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--warmup", type=float, default=60, help="seconds before the RSS baseline")
    ap.add_argument("--rss-bound-mib", type=float, default=16)
    ap.add_argument("--json")
    ap.add_argument("--server-log", default="soak-server.log", help="the server's stderr")
    ap.add_argument("serve", nargs="*", default=["--slots", "8", "--ctx", "1024", "--max-queue", "64"])
    a = ap.parse_args()

    proc, url = start_server(a.binary, *a.serve, log=open(a.server_log, "w"))
    port = int(url.rsplit(":", 1)[1])
    stop, lock, tally, failures, samples = threading.Event(), threading.Lock(), {}, [], []
    threads = [threading.Thread(target=worker, args=(port, i, stop, tally, lock, failures)) for i in range(a.clients)]
    start = time.time()
    for t in threads:
        t.start()
    while time.time() - start < a.minutes * 60:
        samples.append((time.time() - start, rss_bytes(proc.pid)))
        time.sleep(5)
    stop.set()
    for t in threads:
        t.join(300)
    time.sleep(1)  # the last cancels land
    samples.append((time.time() - start, rss_bytes(proc.pid)))
    m = metrics(url)
    proc.terminate()
    code = proc.wait(600)

    after = [r for t, r in samples if t >= a.warmup]
    base = after[0] if after else samples[-1][1]
    growth = (max(after) - base) / (1 << 20) if after else 0
    slope = 0.0
    if len(after) > 2:
        xs = [t for t, _ in samples if t >= a.warmup]
        mx, my = sum(xs) / len(xs), sum(after) / len(after)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, after)) / sum((x - mx) ** 2 for x in xs) * 60 / (1 << 20)
    served = m.get('headroom_requests_total{finish_reason="stop"}', 0) + m.get(
        'headroom_requests_total{finish_reason="length"}', 0)
    summary = {
        "minutes": a.minutes, "clients": a.clients, "serve": a.serve, "requests": tally,
        "total": sum(tally.values()), "lost": len(failures), "failures": failures[:20],
        "server": {"finished": served, "cancelled": m.get('headroom_requests_total{finish_reason="cancelled"}', 0),
                   "errors": {k: v for k, v in m.items() if k.startswith("headroom_errors_total")},
                   "kv_bytes_used": m.get('headroom_kv_cache_bytes_used{device="cpu"}'),
                   "requests_active": m.get("headroom_requests_active")},
        "rss_mib": {"start": samples[0][1] / (1 << 20), "after_warmup": base / (1 << 20),
                    "max_after_warmup": max(after) / (1 << 20) if after else None, "end": samples[-1][1] / (1 << 20),
                    "growth_after_warmup": growth, "slope_mib_per_min": slope},
        "exit_status": code,
    }
    problems = []
    if failures:
        problems.append(f"{len(failures)} requests without the answer their kind calls for")
    if growth > a.rss_bound_mib:
        problems.append(f"RSS grew {growth:.1f} MiB after the warm-up (bound {a.rss_bound_mib} MiB)")
    if summary["server"]["kv_bytes_used"] != 0 or summary["server"]["requests_active"] != 0:
        problems.append("the server still holds requests or KV after the load")
    # Every request that ran ended once: finished, or cancelled (a cancel may also finish first).
    ran = tally.get("stream", 0) + tally.get("whole", 0) + tally.get("cancel", 0)
    if served + summary["server"]["cancelled"] != ran:
        problems.append(f"the server ended {served + summary['server']['cancelled']:g} requests, the clients ran {ran}")
    if code != 0:
        problems.append(f"exit status {code} after SIGTERM")
    summary["problems"] = problems
    print(json.dumps(summary, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({**summary, "rss_samples": samples}, f)
    print("PASS" if not problems else "FAIL: " + "; ".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
