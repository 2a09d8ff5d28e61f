#!/usr/bin/env bash
# Installs kvsim's build dependencies from Debian's archive (idempotent; needs root or sudo).
# nvcc is optional: the CUDA backend builds when it is found (see KVSIM_CUDA).
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev libgtest-dev
      libbenchmark-dev libxxhash-dev libabsl-dev zlib1g-dev python3 python3-matplotlib
      # clang + libclang-rt-dev (libFuzzer): the fuzz targets' smoke runs (docs/files.md).
      clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kvsim: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
