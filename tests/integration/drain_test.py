"""SIGTERM to `headroom serve` during streams: each stream ends properly (finish_reason and
[DONE]), no new connection is accepted while it drains, and the process exits 0.

Usage: drain_test.py HEADROOM_BINARY"""
import http.client
import json
import signal
import socket
import sys
import threading
import time
import urllib.request

from serve import headroom_server

binary = sys.argv[1]
problems = []
process = []


def admitted(url):
    """Requests the server holds (running + waiting), from its metrics."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")))


def stream(port, seed, results, started):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 400, "stream": True, "temperature": 1,
                       "seed": seed})
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    events = []
    for raw in response:
        line = raw.decode().strip()
        if line.startswith("data: "):
            events.append(line[6:])
            started.set()
    results[seed] = (response.status, events)


with headroom_server(binary, "--slots", "2", "--ctx", "1024", process=process) as url:
    port = int(url.rsplit(":", 1)[1])
    results, threads, started = {}, [], threading.Event()
    for seed in range(3):  # two run, one waits
        threads.append(threading.Thread(target=stream, args=(port, seed, results, started)))
        threads[-1].start()
    started.wait(60)
    # SIGTERM once the server holds all three: a connection still in the listener's backlog when
    # it closes is reset, which is not what this test is about.
    deadline = time.time() + 60
    while admitted(url) < 3 and time.time() < deadline:
        time.sleep(0.05)
    process[0].send_signal(signal.SIGTERM)
    for t in threads:
        t.join(120)
    # The listener is closed while the process drains or once it has exited.
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        problems.append("a connection was accepted after SIGTERM")
    except OSError:
        pass
    for seed in range(3):
        status, events = results.get(seed, (None, []))
        if status != 200 or not events or events[-1] != "[DONE]":
            problems.append(f"stream {seed}: status {status}, ends with {events[-2:]}")
            continue
        finish = [json.loads(e)["choices"][0]["finish_reason"] for e in events[:-1]]
        if finish[-1] not in ("stop", "length") or any(f is not None for f in finish[:-1]):
            problems.append(f"stream {seed}: finish reasons {finish[-3:]}")
    print(f"3 streams through SIGTERM: {[len(results.get(s, (0, []))[1]) for s in range(3)]} events")
# headroom_server checked the exit status: 0 after the drain.
for p in problems:
    print("FAIL", p)
sys.exit(1 if problems else 0)
