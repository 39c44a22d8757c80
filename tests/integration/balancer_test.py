"""Scale-out on loopback: three `headroom serve` replicas behind Debian's HAProxy, one killed
(SIGKILL) in the middle of the load. Every request is answered: those in flight on the killed
replica fail with a clear error (HAProxy's 502, or the connection closed) and are retried once by
the client (completions are idempotent); HAProxy itself retries elsewhere a refused connection and
a request that got no byte of answer, and its health check takes the replica out. Half the clients
stream: a stream cut mid-way ends without [DONE], which the client sees and retries. Greedy outputs agree
across replicas, and the survivors share the load.

Usage: balancer_test.py HEADROOM_BINARY WORK_DIR      (exit 77: haproxy is not installed)"""
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from serve import headroom_server, metrics

binary, work = sys.argv[1], sys.argv[2]
haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
if not haproxy:
    print("SKIP: haproxy is not installed (scripts/setup.sh installs it)")
    sys.exit(77)
os.makedirs(work, exist_ok=True)

CLIENTS, LOAD_SECONDS, KILL_AT = 9, 4.0, 1.5
PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went", "One day, a bird"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def haproxy_config(port, replicas):
    servers = "\n".join(f"  server r{i} {url[len('http://'):]}" for i, url in enumerate(replicas))
    return f"""global
  maxconn 512
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  # A refused connection, or a kept one found dead before any answer (empty response), is retried
  # on another replica; a request a replica has begun to answer is never retried here.
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response
frontend completions
  bind 127.0.0.1:{port}
  default_backend headroom
backend headroom
  balance leastconn
  option httpchk GET /health
  http-check expect status 200
  default-server check inter 200ms fall 2 rise 2
{servers}
"""


def complete(port, prompt, stream=False):
    """One request: (status, text) — status None for a broken connection or a stream cut before
    [DONE]; the text is the completion, or the error."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/v1/completions",
                     json.dumps({"prompt": prompt, "max_tokens": 48, "temperature": 0, "stream": stream}),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        body = r.read().decode(errors="replace")
        if r.status != 200:
            return r.status, body
        if not stream:
            return 200, json.loads(body)["choices"][0]["text"]
        events = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
        if not events or events[-1] != "[DONE]":
            return None, f"the stream ended without [DONE] after {len(events)} events"
        return 200, "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
    except (OSError, http.client.HTTPException, ValueError) as e:
        return None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def client(port, index, stop, log):
    n, stream = 0, index % 2 == 1
    while not stop.is_set():
        prompt = PROMPTS[(index + n) % len(PROMPTS)]
        n += 1
        status, text = complete(port, prompt, stream)
        entry = {"prompt": prompt, "stream": stream, "status": status, "text": text, "retry": None}
        if status != 200:
            # Idempotent: once more, after a back-off as clients take (the openai SDK waits 0.5–8 s).
            # Sooner, HAProxy may not have taken the dead replica out yet (2 checks 200 ms apart),
            # and leastconn sends every retry of its own to the replica with no connections: it.
            time.sleep(1.0)
            entry["retry"] = complete(port, prompt, stream)
        log.append(entry)


problems = []
with contextlib.ExitStack() as stack:
    process = []
    replicas = [stack.enter_context(headroom_server(binary, "--slots", "4", "--ctx", "512", process=process,
                                                     exit_status=-9 if i == 1 else 0)) for i in range(3)]
    lb_port = free_port()
    config = os.path.join(work, "haproxy.cfg")
    with open(config, "w") as f:
        f.write(haproxy_config(lb_port, replicas))
    lb = subprocess.Popen([haproxy, "-db", "-f", config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stack.callback(lambda: (lb.terminate(), lb.wait(10)))
    for _ in range(100):
        if complete(lb_port, "Once")[0] == 200:
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("haproxy did not come up: " + (lb.stderr.read() if lb.poll() is not None else ""))

    before = [metrics(url) for url in replicas]
    stop, log, threads = threading.Event(), [], []
    for i in range(CLIENTS):
        threads.append(threading.Thread(target=client, args=(lb_port, i, stop, log)))
        threads[-1].start()
    time.sleep(KILL_AT)
    killed_at = len(log)
    process[1].send_signal(signal.SIGKILL)
    time.sleep(LOAD_SECONDS - KILL_AT)
    stop.set()
    for t in threads:
        t.join(120)
    after = {i: metrics(replicas[i]) for i in (0, 2)}

first_failures = [e for e in log if e["status"] != 200]
lost = [e for e in first_failures if not e["retry"] or e["retry"][0] != 200]
print(f"{len(log)} requests through haproxy ({killed_at} before the kill); "
      f"{len(first_failures)} failed on the killed replica and were retried; {len(lost)} lost")
for e in first_failures:
    print(f"  {'stream' if e['stream'] else 'request'} failed with {e['status']}: {e['text'][:100]!r} "
          f"-> retry {e['retry'][0] if e['retry'] else None}")
if lost:
    problems.append(f"{len(lost)} requests lost: {lost[:3]}")
# Only requests in flight on the killed replica may fail: at most one per client.
if len(first_failures) > CLIENTS:
    problems.append(f"{len(first_failures)} failures, more than the {CLIENTS} requests that can be in flight")
for e in first_failures:
    if e["status"] is not None and e["status"] < 500:
        problems.append(f"a failure that is not the replica's death: {e['status']} {e['text'][:200]}")
# Greedy text is the same whichever replica answered, streamed or not.
texts = {}
for e in log:
    for status, text in ([(e["status"], e["text"])] + ([e["retry"]] if e["retry"] else [])):
        if status == 200:
            texts.setdefault(e["prompt"], set()).add(text)
for prompt, seen in texts.items():
    if len(seen) != 1:
        problems.append(f"{prompt!r}: replicas answered differently: {seen}")


def served(i):
    key = 'headroom_requests_total{finish_reason="length"}'
    stop_key = 'headroom_requests_total{finish_reason="stop"}'
    return (after[i].get(key, 0) + after[i].get(stop_key, 0)) - (before[i].get(key, 0) + before[i].get(stop_key, 0))


share = [served(0), served(2)]
print(f"survivors served {share[0]:g} and {share[1]:g} requests")
if min(share) < 0.5 * max(share):
    problems.append(f"the load is not balanced between the survivors: {share}")
if len(log) < 3 * CLIENTS:
    problems.append(f"only {len(log)} requests were made")
for p in problems:
    print("FAIL", p)
sys.exit(1 if problems else 0)
