#!/usr/bin/env bash
# The main job that README's first command ends with, on the embedded default model.
# usage: tests/main-job.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
"$build/tools/aff-info" --version
