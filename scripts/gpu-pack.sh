#!/usr/bin/env bash
# Packs what scripts/cuda-check.sh runs, built here, for a GPU machine that has the driver but not
# this machine's libraries or ../shared: the binaries (xz-compressed, with their build-tree paths),
# the shared libraries they link beyond glibc and libstdc++ (the GPU machine's own are newer), and
# the shared test files the model tests read. Then on the GPU machine, from the repository root:
#   scripts/gpu-pack.sh --unpack [PACK_DIR] && scripts/cuda-check.sh build
#
# Usage: scripts/gpu-pack.sh [BUILD_DIR] [PACK_DIR]    (defaults: build, .gpu)
#        scripts/gpu-pack.sh --unpack [PACK_DIR]
# The tests find the source, build and shared folders at the absolute paths this machine compiled
# into them; --unpack links those paths to the unpacked tree when they do not exist there.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == --unpack ]]; then
  pack=${2:-.gpu}
  tar -xJf "$pack/bins.tar.xz"
  source_dir=$(cat "$pack/source_dir")
  if [[ ! -e $source_dir ]]; then
    mkdir -p "$(dirname "$source_dir")"
    ln -s "$PWD" "$source_dir"
  fi
  shared_dir=$(cat "$pack/shared_dir")
  if [[ ! -e $shared_dir ]]; then
    mkdir -p "$shared_dir"
    cp -r "$pack/shared/." "$shared_dir/"
  fi
  echo "unpacked; before running: export LD_LIBRARY_PATH=$PWD/$pack/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  exit 0
fi

build=${1:-build}
pack=${2:-.gpu}
mapfile -t paths < <(scripts/cuda-check.sh --binaries "$build")
for b in "${paths[@]}"; do
  [[ -x $b ]] || { echo "gpu-pack: missing $b (build it first)" >&2; exit 1; }
done
rm -rf "$pack"
mkdir -p "$pack/lib" "$pack/shared/models"
tar -cJf "$pack/bins.tar.xz" "${paths[@]}"
# Every library the binaries load, except the C and C++ runtimes the GPU machine has in newer form.
ldd "${paths[@]}" | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' | while read -r lib; do
  cp -L "$lib" "$pack/lib/"
done
sed -n 's/^HEADROOM_SHARED_DIR:PATH=//p' "$build/CMakeCache.txt" >"$pack/shared_dir"
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" >"$pack/source_dir"
shared=$(cat "$pack/shared_dir")
cp "$shared/models/stories260K.gguf" "$shared/models/stories260K.golden.json" "$pack/shared/models/"
du -sh "$pack"
