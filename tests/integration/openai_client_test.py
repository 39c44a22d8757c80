"""Runs the official openai npm client (openai_client/) against headroom serve.

Usage: openai_client_test.py HEADROOM_BINARY WORK_DIR. The client is installed from the npm
registry into WORK_DIR with `npm ci` (the lock file pins every package); when npm or the registry
cannot be reached the test exits 77, which ctest reports as skipped, with the reason printed."""
import os
import shutil
import subprocess
import sys

from serve import headroom_server

SKIP = 77
binary, work = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
os.makedirs(work, exist_ok=True)
for name in ("package.json", "package-lock.json", "openai_client_test.mjs"):
    shutil.copy(os.path.join(here, "openai_client", name), work)
if shutil.which("node") is None or shutil.which("npm") is None:
    print("skipped: node and npm are not installed")
    sys.exit(SKIP)
if not os.path.isdir(os.path.join(work, "node_modules", "openai")):
    npm = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=work,
                         capture_output=True, text=True, timeout=600)
    if npm.returncode != 0:
        print("skipped: npm ci could not install the openai package:\n" + npm.stderr[-2000:])
        sys.exit(SKIP)
with headroom_server(binary, "--api-key", "test-key", "--slots", "2") as url:
    node = subprocess.run(["node", "openai_client_test.mjs", url, "test-key"], cwd=work, timeout=600)
sys.exit(node.returncode)
