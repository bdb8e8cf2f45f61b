#!/usr/bin/env bash
# AMD compile check: compiles every kernel in kernels/*.hip for RDNA4 (gfx1201, wave32) with
# clang 19, device code only, no ROCm installed. Debian 12 has no clang that knows gfx1201, so
# the compiler comes from a Debian trixie chroot made by debootstrap and cached under the build
# folder (made once, a few minutes; reused afterwards). Only compilation is checked: nothing
# here runs or links on an AMD GPU (README says what is and is not verified on AMD).
# usage: tests/gpu/check_gfx1201.sh [BUILD_DIR]      (needs root or sudo, and debootstrap)
#   AFF_GFX_CHROOT=DIR  where the chroot lives (default BUILD_DIR/gfx1201-chroot)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath -m "${1:-$src/build}")
root=$(realpath -m "${AFF_GFX_CHROOT:-$build/gfx1201-chroot}")
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"

if [ ! -x "$root/usr/bin/clang++-19" ]; then
  command -v debootstrap >/dev/null || { echo "check_gfx1201: debootstrap is not installed" >&2; exit 1; }
  echo "check_gfx1201: building the trixie chroot in $root (once)"
  start=$SECONDS
  $sudo rm -rf "$root.tmp"
  mkdir -p "$(dirname "$root")"
  # debootstrap's own default mirror; minbase plus the compiler and the C/C++ headers it needs.
  $sudo debootstrap --variant=minbase --include=clang-19,libc6-dev,libstdc++-14-dev \
    trixie "$root.tmp" >"$build/gfx1201-debootstrap.log" 2>&1 \
    || { echo "check_gfx1201: debootstrap failed; see $build/gfx1201-debootstrap.log" >&2; exit 1; }
  $sudo mv "$root.tmp" "$root"
  echo "check_gfx1201: chroot ready in $((SECONDS - start)) s"
fi

# The sources travel into the chroot by copy (no bind mounts: works without mount rights),
# laid out as the repository is, since includes are written from its root: "kernels/<stem>.hpp"
# and "libaff/<concern>/<file>.hpp".
shopt -s nullglob
kernels=("$src"/kernels/*.hip)
[ ${#kernels[@]} -gt 0 ] || { echo "check_gfx1201: no kernels in $src/kernels" >&2; exit 1; }
$sudo rm -rf "$root/aff-src"
$sudo mkdir -p "$root/aff-src/include"
$sudo cp -r "$src/kernels" "$root/aff-src/include/kernels"
$sudo cp -r "$src/libaff" "$root/aff-src/include/libaff"

fail=0
for k in "${kernels[@]}"; do
  name=$(basename "$k")
  # -nogpulib: no ROCm device libraries. -nogpuinc: no ROCm headers (without it the driver
  # refuses to start when it finds no HIP runtime); clang's own HIP wrapper header is included
  # instead, which supplies __global__ and the maths functions, and kernels/gpu_compat.hpp
  # declares the rest. Device code only (--cuda-device-only), assembly out (-S).
  if out=$($sudo chroot "$root" clang++-19 -x hip -std=c++20 -O3 --offload-arch=gfx1201 \
        -nogpulib -nogpuinc -include __clang_hip_runtime_wrapper.h --cuda-device-only -S \
        -Wall -Werror -Wno-unused-parameter -I/aff-src/include \
        "/aff-src/include/kernels/$name" -o "/aff-src/${name%.hip}.s" 2>&1); then
    echo "PASS gfx1201 $name"
  else
    echo "FAIL gfx1201 $name"; echo "$out" | head -40; fail=1
  fi
done
[ $fail = 0 ] && echo "check_gfx1201: all ${#kernels[@]} kernels compile for gfx1201"
exit $fail
