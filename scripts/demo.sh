#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds headroom and runs the main job on the shipped model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build
build/apps/headroom/headroom run -p "Once upon a time" -n 128 --seed 42
