#!/usr/bin/env bash
# Runs one node test file against aff-serve, installing the pinned openai client into
# node_modules here first if it is missing (setup.sh normally has done it).
# usage: run.sh AFF_SERVE_BINARY TEST_FILE
set -euo pipefail
cd "$(dirname "$0")"
flock .npm-lock bash -c '[ -d node_modules/openai ] || npm ci --no-audit --no-fund --loglevel=error'
# --draft auto's memory (libaff/runtime/draft_memory.hpp) in a folder of this run's own, not
# the user's cache: every test starts with none.
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
AFF_SERVE=$1 AFF_CACHE_DIR=$cache node --test --test-reporter=spec "$2"
