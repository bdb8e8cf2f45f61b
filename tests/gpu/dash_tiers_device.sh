#!/usr/bin/env bash
# The live view's Tiers panel and expert plane on a GPU running tiered experts (issue 19; the
# CPU suite cannot: only the GPU forward tiers its experts). With prebuilt portable binaries
# laid out as the build tree (BIN/tools/aff-run, BIN/tests/make_geometry_container;
# tests/gpu/configure_portable.sh): a 2-layer, 16-expert container of V4-Flash's geometry, run
# by aff-run --ui dash with the slab capped at half the experts (--gpu-expert-mib 138: 16
# slots of 9043968 bytes) and the heat mover, in a real terminal (tmux, 100x30; tmux from
# PATH, or the repository's .devtools/bin). Frames are taken every half second while it
# decodes, the last kept in OUT/dash-tiers.txt (and .ansi). Checks: the Tiers panel names
# 16 experts on the GPU and 16 in the host pool (nonzero both), hit rates and a PCIe rate,
# the plane says its tiers come from the expert table, and the plane's rows hold cells in
# the GPU's colour (green) and the host's (yellow). About 30 s; exits 1 if a check failed.
# usage: tests/gpu/dash_tiers_device.sh BIN OUT
set -uo pipefail
bin=$(cd "${1:?usage: dash_tiers_device.sh BIN OUT}" && pwd) || exit 2
out=${2:?usage: dash_tiers_device.sh BIN OUT}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
repo=$(cd "$(dirname "$0")/../.." && pwd)
[ -d "$repo/.devtools/bin" ] && PATH=$repo/.devtools/bin:$PATH
command -v tmux >/dev/null || { echo "FAIL dash-tiers: no tmux on PATH (nor in .devtools/bin)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
. "$repo/tests/cli/tmux.bash"

geo=$work/v4-2x16.aff
if ! timeout 120 "$bin/tests/make_geometry_container" "$geo" --layers 2 --experts 16 --vocab 4096 -q; then
  echo "FAIL dash-tiers: make_geometry_container"
  exit 1
fi
prompt=$(seq -s, 1 40)
pane_start 100 30 "env -u LD_LIBRARY_PATH LANG=C.UTF-8 '$bin/tools/aff-run' -m '$geo' --tokens '$prompt' -n 8000 -c 8192" \
  "--ignore-eos --temp 0 --no-echo --gpus 1 --gpu-expert-mib 138 --placement-strategy heat --ui dash"
shot=$out/dash-tiers.txt
pane_frames "$out/dash-tiers" 80 'decode +[1-9][0-9]*\.[0-9] tok/s' 'Tiers ─ GPU'
frames=$FRAMES
pane_keys q
[ $frames -gt 0 ] || { echo "FAIL dash-tiers: no frame with a decode rate and tiered figures; the pane:"; pane_history | tail -20; exit 1; }
echo "dash-tiers: $frames frames taken"
failed=0
check() {  # check DESCRIPTION REGEX [FILE]
  if grep -Eq -- "$2" "${3:-$shot}"; then echo "PASS dash-tiers: $1"; else echo "FAIL dash-tiers: $1 (/$2/)"; failed=1; fi
}
check "the Tiers panel counts 16 experts on the GPU and 16 in the host pool" '─ Tiers ─ GPU 16  host 16 ─'
check "hit rates of both tiers" 'hit  GPU [0-9]+\.[0-9]%  host [0-9]+\.[0-9]%'
check "a PCIe rate, and no SSD tier" 'PCIe [0-9.]+ [kMGT]?B/s  SSD no tier'
check "moves a token and the CPU-expert share" 'moves/token [0-9]+\.[0-9]{2}  CPU experts 0\.0%'
check "the plane's tiers come from the expert table" "tiers: expert table, [0-9]+ moves"
check "the plane: 2 layers x 16 experts" '─ Expert plane ─ 2 layers x 16 experts'
plane=$work/plane.ansi
sed -n 's/.*\(L[01]  .*\)/\1/p' "$out/dash-tiers.ansi" >"$plane"  # the plane's rows, from their labels on
check "plane cells in the GPU's colour (green)" $'\e\\[([0-9]+;)*32m' "$plane"
check "plane cells in the host's colour (yellow)" $'\e\\[([0-9]+;)*33m' "$plane"
cat "$shot"
[ $failed = 0 ] && echo "dash_tiers_device.sh: all passed" || echo "dash_tiers_device.sh: FAILURES"
exit $failed
