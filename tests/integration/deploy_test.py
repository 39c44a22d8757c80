"""deploy/ checked against headroom itself: the manifests agree with each other (ports, labels,
probes, drain timeout and grace period), `serve` accepts every flag the Deployment gives it, the
endpoint picker's configuration names metrics a running `headroom serve` exposes (and the vLLM
names its defaults read), and deploy/plan-resources.py turns a plan into a resources block.

Usage: deploy_test.py HEADROOM_BINARY DEPLOY_DIR"""
import re
import subprocess
import sys
import urllib.request

import yaml

from serve import headroom_server

binary, deploy = sys.argv[1], sys.argv[2]
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


deployment = yaml.safe_load(open(f"{deploy}/headroom.yaml"))
values = yaml.safe_load(open(f"{deploy}/inferencepool-values.yaml"))
route = yaml.safe_load(open(f"{deploy}/httproute.yaml"))
epp = yaml.safe_load(values["inferenceExtension"]["pluginsCustomConfig"][values["inferenceExtension"]["pluginsConfigFile"]])

pod = deployment["spec"]["template"]
container = pod["spec"]["containers"][0]
args = container["args"]
flag = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("-")}
port = int(flag["--port"])
check(args[0] == "serve", "the container does not run serve")
check(flag.get("--host") == "0.0.0.0", "serve must listen on all addresses in a pod (--host 0.0.0.0)")
check(container["ports"][0]["containerPort"] == port, "containerPort differs from --port")
for probe in ("startupProbe", "readinessProbe"):
    check(container[probe]["httpGet"]["path"] == "/health", f"{probe} is not on /health")
check("livenessProbe" not in container, "a liveness probe would kill a draining pod")
check(pod["spec"]["terminationGracePeriodSeconds"] > float(flag["--drain-timeout"]),
      "terminationGracePeriodSeconds must exceed --drain-timeout")
labels = pod["metadata"]["labels"]
for key, value in values["inferencePool"]["modelServers"]["matchLabels"].items():
    check(labels.get(key) == value, f"the pool selects {key}={value}, the pods do not carry it")
check(deployment["spec"]["selector"]["matchLabels"].items() <= labels.items(), "the Deployment selector misses its pods")
check([p["number"] for p in values["inferencePool"]["targetPorts"]] == [port], "the pool targets another port")
check(route["spec"]["rules"][0]["backendRefs"][0]["kind"] == "InferencePool", "the route does not lead to the pool")
for key in ("requests", "limits"):
    check("memory" in container["resources"][key], f"resources.{key} has no memory")

# Every flag the Deployment passes is one serve knows.
help_text = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, check=True).stdout
for f in flag:
    check(re.search(rf"(^|[\s,]){re.escape(f)}\b", help_text) is not None, f"serve --help does not list {f}")

# The picker's names are on /metrics, with the labels it reads.
extractor = next(p for p in epp["plugins"] if p["type"] == "core-metrics-extractor")
engine = next(e for e in extractor["parameters"]["engineConfigs"] if e["name"] == labels[
    "inference.networking.k8s.io/engine-type"])
wanted = [v for k, v in engine.items() if k.endswith("Spec") and v]
wanted += ["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
           "vllm:lora_requests_info", "vllm:cache_config_info"]
with headroom_server(binary, "--slots", "2", "--ctx", "256") as url:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        exposition = r.read().decode()
families = set(re.findall(r"^# TYPE (\S+) gauge$", exposition, re.M))
for name in wanted:
    check(name in families, f"{name} is not a gauge on /metrics")
info = re.search(r"^vllm:cache_config_info\{([^}]*)\} 1$", exposition, re.M)
check(info is not None and "block_size=" in info.group(1) and "num_gpu_blocks=" in info.group(1),
      "vllm:cache_config_info lacks block_size or num_gpu_blocks")

# A plan becomes a resources block.
out = subprocess.run(["/usr/bin/python3", f"{deploy}/plan-resources.py", binary, "--", "--ctx", "256", "--slots", "2"],
                     capture_output=True, text=True, check=True).stdout
resources = yaml.safe_load(out)["resources"]
check(resources["requests"]["memory"].endswith("Mi") and int(resources["requests"]["memory"][:-2]) > 256,
      f"plan-resources.py gave {resources}")

print(f"deploy/: {len(flag)} serve flags, {len(wanted)} metrics the picker reads, resources {resources['requests']}")
for p in problems:
    print("FAIL", p)
sys.exit(1 if problems else 0)
