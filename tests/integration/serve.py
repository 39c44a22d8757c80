"""Starts `headroom serve --port 0` for an integration test and stops it, whatever happens."""
import contextlib
import re
import subprocess
import sys
import time
import urllib.request


@contextlib.contextmanager
def headroom_server(binary, *args, process=None, exit_status=0):
    """Yields the server's base URL (http://127.0.0.1:PORT) once it answers /health; `process`, a
    list, receives the Popen object. On leaving, SIGTERM; the exit status must be `exit_status`
    (a test that kills the server itself says which signal: -9)."""
    proc = subprocess.Popen([binary, "serve", "--port", "0", *args], stderr=subprocess.PIPE, text=True)
    if process is not None:
        process.append(proc)
    try:
        url = None
        lines = []
        deadline = time.time() + 120
        while url is None and time.time() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"on (http://[0-9.]+:[0-9]+)", line)
            if m:
                url = m.group(1)
        if url is None:
            raise RuntimeError("headroom serve did not start:\n" + "".join(lines))
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
