"""Installs the official openai npm client (openai_client/, pinned by its lock file) into a work
folder for a test, or exits 77 (ctest's skip) saying why when node, npm or the registry is not
there."""
import os
import shutil
import subprocess
import sys

SKIP = 77


def install_openai_client(work, script):
    """Copies package.json, its lock and `script` into `work` and runs `npm ci` there once."""
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(work, exist_ok=True)
    for name in ("package.json", "package-lock.json", script):
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
