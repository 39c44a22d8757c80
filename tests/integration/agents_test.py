"""Agent loops through the official openai npm client (openai_client/agents_client_test.mjs) against
headroom serve on the tiny Gemma 4 synth model (headroom synth --arch gemma4: Gemma 4's special
tokens and chat template), then every tool call's arguments validated by python3-jsonschema
(Draft 2020-12) against its tool's schema.

Usage: agents_test.py HEADROOM_BINARY WORK_DIR. Shares WORK_DIR's npm install with
openai_client_test.py; exits 77 (skipped) when node, npm or the registry is unavailable."""
import json
import os
import subprocess
import sys

import jsonschema

from openai_npm import install_openai_client
from serve import headroom_server

binary, work = sys.argv[1], sys.argv[2]
install_openai_client(work, "agents_client_test.mjs")

model = os.path.join(work, "tiny-e-gemma4.gguf")
subprocess.run([binary, "synth", "--arch", "gemma4", "--shape", "tiny-e", "-o", model], check=True,
               stdout=subprocess.DEVNULL)
calls_file = os.path.join(work, "agent-calls.json")
with headroom_server(binary, "-m", model, "--ctx", "4096", "--slots", "2") as url:
    node = subprocess.run(["node", "agents_client_test.mjs", url, calls_file], cwd=work, timeout=600)
if node.returncode != 0:
    sys.exit(node.returncode)

with open(calls_file) as f:
    calls = json.load(f)
invalid = 0
for call in calls:
    errors = list(jsonschema.Draft202012Validator(call["schema"]).iter_errors(call["arguments"]))
    if errors:
        invalid += 1
        print(f"{call['where']}: {call['name']}({json.dumps(call['arguments'])}): {errors[0].message}")
print(f"{len(calls)} tool calls validated against their schemas, {invalid} invalid")
sys.exit(1 if invalid or not calls else 0)
