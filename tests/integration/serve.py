"""Starts `headroom serve --port 0` for an integration test and stops it, whatever happens."""
import contextlib
import re
import subprocess
import sys
import threading
import time
import urllib.request


def start_server(binary, *args, log=None):
    """Starts `headroom serve --port 0 ARGS`; returns (process, base URL http://127.0.0.1:PORT) once
    it listens. With `log` (a text file), the server's stderr goes on to it from then on."""
    proc = subprocess.Popen([binary, "serve", "--port", "0", *args], stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"on (http://[0-9.]+:[0-9]+)", line)
        if m:
            if log is not None:
                log.writelines(lines)
                threading.Thread(target=lambda: [log.write(rest) or log.flush() for rest in proc.stderr],
                                 daemon=True).start()
            return proc, m.group(1)
    proc.kill()
    proc.wait()
    raise RuntimeError("headroom serve did not start:\n" + "".join(lines))


@contextlib.contextmanager
def headroom_server(binary, *args, process=None, exit_status=0):
    """Yields the server's base URL (http://127.0.0.1:PORT) once it answers /health; `process`, a
    list, receives the Popen object. On leaving, SIGTERM; the exit status must be `exit_status`
    (a test that kills the server itself says which signal: -9)."""
    proc, url = start_server(binary, *args)
    if process is not None:
        process.append(proc)
    try:
        with urllib.request.urlopen(url + "/health", timeout=30) as r:
            assert r.status == 200
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        rest = proc.stderr.read()
        if rest:
            sys.stderr.write(rest)
        # SIGTERM drains: the server ends what runs and exits 0.
        if proc.returncode != exit_status:
            raise RuntimeError(f"headroom serve exited with {proc.returncode}, not {exit_status}")


def metrics(url):
    """The /metrics exposition as {series: value}."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out
