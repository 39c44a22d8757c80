"""Runs the official openai npm client (openai_client/) against headroom serve.

Usage: openai_client_test.py HEADROOM_BINARY WORK_DIR. The client is installed from the npm
registry into WORK_DIR with `npm ci` (the lock file pins every package); when npm or the registry
cannot be reached the test exits 77, which ctest reports as skipped, with the reason printed."""
import subprocess
import sys

from openai_npm import install_openai_client
from serve import headroom_server

binary, work = sys.argv[1], sys.argv[2]
install_openai_client(work, "openai_client_test.mjs")
with headroom_server(binary, "--api-key", "test-key", "--slots", "2") as url:
    node = subprocess.run(["node", "openai_client_test.mjs", url, "test-key"], cwd=work, timeout=600)
sys.exit(node.returncode)
