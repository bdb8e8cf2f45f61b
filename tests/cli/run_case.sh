#!/usr/bin/env bash
# Runs one CLI test case (zstd's cli-tests layout): CASE.sh runs in a fresh temporary
# directory with the tools on PATH, $DATA pointing at tests/data and $AFF_CACHE_DIR at a folder
# in it not made yet (no memory of earlier runs: draft_memory.hpp); its exit status
# and output are compared with the optional sibling files
#   CASE.sh.exit            expected exit status (default 0)
#   CASE.sh.stderr.exact    expected stderr, byte for byte
#   CASE.sh.stderr.glob     a bash glob stderr must match as a whole
#   CASE.sh.stdout.exact / CASE.sh.stdout.glob   likewise for stdout
# A case that exits 77 without expecting it is skipped (ctest's SKIP_RETURN_CODE): it
# needs something this machine lacks and says what on stderr.
# usage: run_case.sh CASE.sh TOOLS_DIR DATA_DIR SOURCE_DIR
set -u
case_file=$1 tools=$2 data=$3 source=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
PATH="$tools:$PATH" DATA="$data" SRC="$source" AFF_CACHE_DIR="$work/.cache" bash -eu "$case_file" >stdout 2>stderr
status=$?
expected=0
[ -f "$case_file.exit" ] && expected=$(tr -d '[:space:]' <"$case_file.exit")
if [ "$status" = 77 ] && [ "$expected" != 77 ]; then
  cat stderr
  exit 77
fi
fail=0
report() { echo "FAIL $(basename "$case_file"): $*"; fail=1; }
[ "$status" = "$expected" ] || report "exit status $status, expected $expected"
for stream in stdout stderr; do
  if [ -f "$case_file.$stream.exact" ] && ! cmp -s "$case_file.$stream.exact" "$stream"; then
    report "$stream differs from $stream.exact"; diff "$case_file.$stream.exact" "$stream" | head -20
  fi
  if [ -f "$case_file.$stream.glob" ]; then
    pattern=$(cat "$case_file.$stream.glob")
    # shellcheck disable=SC2053
    [[ "$(cat "$stream")" == $pattern ]] || report "$stream does not match $stream.glob"
  fi
done
if [ "$fail" != 0 ]; then
  echo "--- stdout"; head -40 stdout; echo "--- stderr"; head -40 stderr
fi
exit $fail
