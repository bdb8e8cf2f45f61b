#!/usr/bin/env bash
# README's first command: installs what aff needs from Debian packages, builds it into
# build/, and runs the main job on the embedded default model. Safe to run again.
#   AFF_SKIP_INSTALL=1  skip the package installation (packages already present)
#   AFF_BUILD_DIR=DIR   build somewhere other than build/
#   AFF_CMAKE_ARGS=...  extra arguments for cmake (e.g. -DAFF_GPU=OFF)
set -euo pipefail
cd "$(dirname "$0")"
build=${AFF_BUILD_DIR:-build}

packages=(build-essential cmake pkg-config git ca-certificates
  libcli11-dev nlohmann-json3-dev libzstd-dev libxxhash-dev libssl-dev libpcre2-dev catch2 libncurses-dev
  libpng-dev  # optional to the build: aff-trace replay's PNG curve beside the SVG
  clang libclang-rt-14-dev python3 debootstrap curl
  tmux man-db groff-base)  # the last three: the completion and live-view tests (a real terminal under tmux), man --warnings
# Node.js and npm (tests fetch the reference tokenizer and the OpenAI client with npm)
# count as present when the commands exist, however they were installed.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

if [ "${AFF_SKIP_INSTALL:-0}" != 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# shellcheck disable=SC2086
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release ${AFF_CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)"

# The openai client for aff-serve's end-to-end tests (pinned in tests/serve/package-lock.json).
if [ ! -d tests/serve/node_modules/openai ]; then
  (cd tests/serve && npm ci --no-audit --no-fund --loglevel=error)
fi

# The main job on the embedded default model.
bash tests/main-job.sh "$build"
