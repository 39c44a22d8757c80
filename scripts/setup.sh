#!/usr/bin/env bash
# Installs the Debian packages headroom builds and tests with (only those missing).
set -euo pipefail

packages=(
  build-essential cmake ninja-build g++ pkg-config
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libboost1.81-dev
  libpng-dev libjpeg62-turbo-dev libsndfile1-dev libsamplerate0-dev
  clang libclang-rt-14-dev lld
  python3 python3-jinja2 python3-jsonschema python3-numpy python3-pil python3-yaml haproxy
  chromium
)

# The server's client test runs the official openai npm package: Node.js and npm from Debian
# unless the machine already has them.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
