"""The bounded load test on loopback: `headroom load` sends a fixed number of requests from 32
concurrent clients with the default mix (short chat, long document, JSON extraction) to
headroom serve. Zero errors, every response complete, and the server's /metrics agree with the
client's own counts.

Usage: load_test.py HEADROOM_BINARY WORK_DIR"""
import json
import os
import subprocess
import sys

from serve import headroom_server, metrics

binary, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
report_path = os.path.join(work, "load.json")
REQUESTS = 96
with headroom_server(binary, "--slots", "16", "--ctx", "2048") as url:
    before = metrics(url)
    subprocess.run([binary, "load", "--endpoint", url, "-c", "32", "--requests", str(REQUESTS), "--warmup", "0",
                    "--json", report_path], check=True, timeout=900)
    after = metrics(url)

report = json.load(open(report_path))
samples = report["samples"]
problems = []
if report["requests"]["failed"] != 0 or report["errors"]:
    problems.append(f"errors: {report['errors']}")
if len(samples) != REQUESTS or report["requests"]["succeeded"] != REQUESTS:
    problems.append(f"{len(samples)} samples, {report['requests']['succeeded']} succeeded, want {REQUESTS}")
for s in samples:
    if s["error"] or s["tokens"] <= 0 or s["ttft_s"] < 0:
        problems.append(f"incomplete response: {s}")
items = {s["item"] for s in samples}
if len(items) < 3:
    problems.append(f"the mix sent only {items}")


def delta(series):
    return after.get(series, 0) - before.get(series, 0)


client_tokens = sum(s["tokens"] for s in samples)
checks = {
    "generated tokens": (delta("headroom_generated_tokens_total"), client_tokens),
    "prompt tokens": (delta("headroom_prompt_tokens_total"), report["tokens"]["prompt"]),
    "requests finished": (delta('headroom_requests_total{finish_reason="stop"}') +
                          delta('headroom_requests_total{finish_reason="length"}'), REQUESTS),
    "end-to-end latencies": (delta("headroom_request_duration_seconds_count"), REQUESTS),
    "first tokens": (delta("headroom_time_to_first_token_seconds_count"), REQUESTS),
    "requests still active": (after.get("headroom_requests_active", -1), 0),
    "KV bytes still held": (after.get('headroom_kv_cache_bytes_used{device="cpu"}', -1), 0),
}
for name, (server, client) in checks.items():
    status = "ok" if server == client else "MISMATCH"
    print(f"{status:8} {name}: server {server:g}, client {client:g}")
    if server != client:
        problems.append(f"{name}: server {server:g} vs client {client:g}")
errors = {k: v for k, v in after.items() if k.startswith("headroom_errors_total")}
if any(v for v in errors.values()):
    problems.append(f"server counted errors: {errors}")
print(f"{REQUESTS} requests, 32 clients: {report['throughput']['total_tokens_per_second']:.1f} tok/s total")
for p in problems:
    print("FAIL", p)
sys.exit(1 if problems else 0)
