#!/usr/bin/env bash
# Configures a GPU build whose binaries run on a machine that has the CUDA driver but not
# aff's build dependencies (the device machine lacks libxxhash, for one): libstdc++, libgcc,
# zstd, xxHash, PCRE2 and libcrypto are linked statically, the CUDA runtime as usual (a fully
# static binary crashes at CUDA initialisation). Build here, copy the binaries over, run them
# there with tests/gpu/run.sh's AFF_GPU_PREBUILT=1.
# usage: tests/gpu/configure_portable.sh [BUILD_DIR] [extra cmake args...]   (default build-gpu)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build-gpu}
shift || true
static() { local a; a=$(gcc -print-file-name="lib$1.a"); [ -f "$a" ] || { echo "configure_portable.sh: no static lib$1.a (install its -dev package)" >&2; exit 1; }; realpath "$a"; }
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAFF_GPU=CUDA \
  -DCMAKE_CUDA_ARCHITECTURES="${AFF_CUDA_ARCH:-90}" "${launcher[@]}" \
  "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc" \
  -Dpkgcfg_lib_ZSTD_zstd="$(static zstd)" -Dpkgcfg_lib_XXHASH_xxhash="$(static xxhash)" \
  -Dpkgcfg_lib_PCRE2_pcre2-8="$(static pcre2-8)" -Dpkgcfg_lib__OPENSSL_crypto="$(static crypto)" \
  -DOPENSSL_USE_STATIC_LIBS=TRUE "$@"
