#!/usr/bin/env bash
# Installs kvsim's build dependencies from Debian's archive (idempotent; needs root or sudo).
# nvcc is optional: the CUDA backend builds when it is found (see KVSIM_CUDA).
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev libgtest-dev
      libbenchmark-dev libxxhash-dev libabsl-dev zlib1g-dev python3 python3-matplotlib
      # NLopt: kvsim calibrate's bounded derivative-free optimiser (BOBYQA).
      libnlopt-dev libnlopt-cxx-dev
      # clang + libclang-rt-dev (libFuzzer): the fuzz targets' smoke runs (docs/files.md).
      clang libclang-rt-dev
      # python3-dev python3-pip: the Python package (python/) when python3 is Debian's.
      python3-dev python3-pip
      # prometheus (+ promtool): the prometheus.roundtrip test of --metrics (docs/metrics.md).
      prometheus)
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
# The Python package (python/, docs/python.md): nanobind and scikit-build-core pinned as in
# pyproject.toml, numpy/pandas/pytest for its tests, into the python3 first on PATH (the one
# CMake builds the extension for), unless those exact versions are there already. Debian's own
# python3 refuses pip (PEP 668) unless told. Ray too (the executor="ray" test,
# python/requirements-ray.txt: ~50 s of pip), unless KVSIM_NO_RAY=1.
py_reqs=("$(dirname "$0")/../python/requirements-dev.txt")
[ "${KVSIM_NO_RAY:-0}" = 1 ] || py_reqs+=("$(dirname "$0")/../python/requirements-ray.txt")
if ! python3 - "${py_reqs[@]}" <<'EOF'
import sys, importlib.metadata as md
for path in sys.argv[1:]:
    for line in open(path):
        req = line.split("#")[0].strip()
        if req:
            name, version = req.split("==")
            try:
                if md.version(name) != version: sys.exit(1)
            except md.PackageNotFoundError:
                sys.exit(1)
EOF
then
  py_flags=(-q --disable-pip-version-check --root-user-action=ignore)
  if python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(
      sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
    py_flags+=(--break-system-packages)
  fi
  echo "kvsim: pip installing $(cat "${py_reqs[@]}" | grep -v '^#' | tr '\n' ' ')" >&2
  python3 -m pip install "${py_flags[@]}" "${py_reqs[@]/#/-r}"
fi
