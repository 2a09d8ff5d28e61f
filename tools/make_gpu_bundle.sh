#!/usr/bin/env bash
# Builds .gpu-bundle/: the SOURCE of the dependencies that bench/gpu_check.sh needs, for the bare
# GPU machine where nothing can be installed (see docs/cuda-backend.md, "Running on a GPU").
# Run it here (a Debian machine with tools/install-deps.sh's packages and access to Debian's
# archive), then carry .gpu-bundle (git-ignored) along with the device call.
#
#   bash tools/make_gpu_bundle.sh            # writes ./.gpu-bundle (replaces an old one)
#   KVSIM_BENCHMARK_ORIG=/path/benchmark_1.7.1.orig.tar.gz \
#   KVSIM_ZLIB_ORIG=/path/zlib_1.2.13.dfsg.orig.tar.bz2 bash tools/make_gpu_bundle.sh  # offline
#
# Contents (about 5 MiB): googletest (Debian's libgtest-dev ships its source), Google Benchmark
# 1.7.1 (Debian's source package, with Debian's patches: the same version as libbenchmark-dev
# here), fmt headers (used header-only, FMT_HEADER_ONLY), xxhash.h (XXH_INLINE_ALL), CLI11 and
# nlohmann-json headers (header-only libraries) and zlib 1.2.13's C source (Debian's source
# package; built as a static library there, because the GPU image is not known to ship zlib.h).
# Abseil is not bundled: without it kvsim_core's BlockPool falls back to std::unordered_map.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dest=$root/.gpu-bundle
bench_version=1.7.1
bench_debian_version=1.7.1-1
zlib_version=1.2.13.dfsg
zlib_debian_version=1:1.2.13.dfsg-1

die() { echo "make_gpu_bundle: error: $*" >&2; exit 1; }
pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || die "package $1 is not installed (run tools/install-deps.sh)"; }

for f in /usr/src/googletest/CMakeLists.txt /usr/include/fmt/format-inl.h /usr/include/xxhash.h \
  /usr/include/CLI/CLI.hpp /usr/include/nlohmann/json.hpp; do
  [ -f "$f" ] || die "$f is missing (run tools/install-deps.sh)"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bundle/include" "$work/bundle/licenses"
b=$work/bundle

# Every copy keeps its source's modification time (cp -p; tar keeps the archives' own), so a
# rerun writes the same times and an existing build directory is not rebuilt from scratch.

# googletest: the top-level CMake project with gtest and gmock; docs and tests dropped.
cp -rp /usr/src/googletest "$b/googletest"
rm -rf "$b/googletest/googletest/test" "$b/googletest/googlemock/test" "$b/googletest/docs" \
  "$b/googletest/googletest/samples"
cp -p /usr/share/doc/libgtest-dev/copyright "$b/licenses/googletest.copyright"

# Debian source packages (orig tarball + Debian's changes), fetched with apt-get source into a
# private list directory (the system's apt configuration is not touched).
apt_dir=$work/apt
apt_opts=(-oDir::Etc::SourceList="$apt_dir/deb-src.sources" -oDir::Etc::SourceParts=/dev/null
          -oDir::State::Lists="$apt_dir/lists" -oAPT::Sandbox::User=root)
apt_ready=0
apt_source() { # apt_source PACKAGE=VERSION: downloads into $apt_dir/dl
  if [ "$apt_ready" -eq 0 ]; then
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/dl"
    cat >"$apt_dir/deb-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    timeout 300 apt-get "${apt_opts[@]}" -qq update >/dev/null ||
      die "apt-get update for deb-src failed (no access to Debian's archive? set KVSIM_*_ORIG)"
    apt_ready=1
  fi
  echo "make_gpu_bundle: fetching Debian source package $1" >&2
  (cd "$apt_dir/dl" && timeout 300 apt-get "${apt_opts[@]}" -qq source --download-only "$1" \
    >/dev/null) || die "apt-get source $1 failed"
}

# Google Benchmark: Debian's source package with Debian's patches applied.
orig=${KVSIM_BENCHMARK_ORIG:-}
if [ -z "$orig" ]; then
  apt_source "benchmark=$bench_debian_version"
  orig=$apt_dir/dl/benchmark_$bench_version.orig.tar.gz
  debian_tar=$apt_dir/dl/benchmark_$bench_debian_version.debian.tar.xz
else
  debian_tar=${KVSIM_BENCHMARK_DEBIAN:-}
fi
[ -f "$orig" ] || die "$orig not found"
tar -xzf "$orig" -C "$work"
src=$work/benchmark-$bench_version
if [ -n "$debian_tar" ] && [ -f "$debian_tar" ]; then
  tar -xJf "$debian_tar" -C "$src"
  while read -r p; do
    [ -n "$p" ] && [ "${p#\#}" = "$p" ] && patch -s -p1 -d "$src" <"$src/debian/patches/$p"
  done <"$src/debian/patches/series"
  patched="Debian patches: $(tr '\n' ' ' <"$src/debian/patches/series")"
else
  patched="no Debian patches applied"
fi
mkdir -p "$b/benchmark"
cp -rp "$src/CMakeLists.txt" "$src/cmake" "$src/include" "$src/src" "$src/LICENSE" "$b/benchmark/"
# Its CMakeLists only reads test/ when BENCHMARK_ENABLE_TESTING is ON (kvsim turns it off).
cp -p "$src/LICENSE" "$b/licenses/benchmark.LICENSE"

# zlib: the library's C files and headers only (Debian's patches touch minizip and the build
# system, neither of which is used). Built by cmake/kvsim_deps.cmake as kvsim_bundled_zlib.
zorig=${KVSIM_ZLIB_ORIG:-}
if [ -z "$zorig" ]; then
  apt_source "zlib=$zlib_debian_version"
  zorig=$apt_dir/dl/zlib_$zlib_version.orig.tar.bz2
fi
[ -f "$zorig" ] || die "$zorig not found"
tar -xjf "$zorig" -C "$work"
zsrc=$work/zlib-$zlib_version
mkdir -p "$b/zlib"
cp -p "$zsrc"/*.c "$zsrc"/*.h "$zsrc/LICENSE" "$b/zlib/"
cp -p "$zsrc/LICENSE" "$b/licenses/zlib.LICENSE"

# CLI11 and nlohmann-json: header-only.
cp -rp /usr/include/CLI "$b/include/CLI"
cp -p /usr/share/doc/libcli11-dev/copyright "$b/licenses/cli11.copyright"
cp -rp /usr/include/nlohmann "$b/include/nlohmann"
cp -p /usr/share/doc/nlohmann-json3-dev/copyright "$b/licenses/nlohmann-json.copyright"

# fmt (header-only) and xxhash (single header).
cp -rp /usr/include/fmt "$b/include/fmt"
cp -p /usr/share/doc/libfmt-dev/copyright "$b/licenses/fmt.copyright"
cp -p /usr/include/xxhash.h "$b/include/xxhash.h"
cp -p /usr/share/doc/libxxhash-dev/copyright "$b/licenses/xxhash.copyright"

cat >"$b/MANIFEST" <<EOF
kvsim GPU-check dependency bundle (tools/make_gpu_bundle.sh), made $(date -u +%Y-%m-%dT%H:%M:%SZ)
Used by CMake via -DKVSIM_DEPS_DIR=<this folder> (preset gpu-bundle, bench/gpu_check.sh).

googletest   $(pkg_version libgtest-dev)   BSD-3-Clause   source of Debian's libgtest-dev (/usr/src/googletest), tests/docs/samples removed
benchmark    $bench_debian_version          Apache-2.0     Debian source package benchmark ($patched); test/, docs/, bindings/ removed
fmt          $(pkg_version libfmt-dev)   MIT            headers of Debian's libfmt-dev, used with FMT_HEADER_ONLY
xxhash       $(pkg_version libxxhash-dev)          BSD-2-Clause   xxhash.h of Debian's libxxhash-dev, used with XXH_INLINE_ALL
cli11        $(pkg_version libcli11-dev)       BSD-3-Clause   headers of Debian's libcli11-dev (header-only)
nlohmann     $(pkg_version nlohmann-json3-dev)        MIT            headers of Debian's nlohmann-json3-dev (header-only)
zlib         $zlib_debian_version      Zlib           C source of Debian's source package zlib (library files only), built static
abseil       (not bundled)                 kvsim_core's BlockPool uses std::unordered_map without it
Licence texts: licenses/
EOF

rm -rf "$dest"
mv "$b" "$dest"
echo "make_gpu_bundle: wrote $dest ($(du -sh "$dest" | cut -f1)); carry \".gpu-bundle\" in the device run" >&2
