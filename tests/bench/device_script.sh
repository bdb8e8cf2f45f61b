# What the device scripts under tests/bench (dspark_*_device.sh, sampled_drafts_device.sh) share,
# sourced, not run: their arguments BIN (a portable build tree: tests/gpu/configure_portable.sh)
# and OUT (the folder whose files travel back), a temporary work folder on the machine's disk
# removed on exit (containers of many GB must not go under OUT), the summary file and note().
# usage: device_script_begin SCRIPT_NAME WORK_PREFIX "$@"   (then: || exit 2)
# sets: bin out work summary rc start; note TEXT appends a line to the summary and prints it.
device_script_begin() {
  local name=$1 prefix=$2
  bin=$(cd "${3:?usage: $name BIN OUT}" && pwd) || return 2
  out=${4:?usage: $name BIN OUT}
  mkdir -p "$out" && out=$(cd "$out" && pwd) || return 2
  work=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX") || return 2
  trap 'rm -rf "$work"' EXIT
  summary=$out/summary.txt
  : >"$summary"
  rc=0
  start=$SECONDS
}
note() { echo "$*" | tee -a "$summary"; }
