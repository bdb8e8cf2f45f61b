#!/usr/bin/env bash
# The live view on a machine with a GPU (the device run that tests/cli/aff-run/ui-dash.sh cannot
# make: no GPU library on the CPU-only machines): aff-run --ui dash on the trained tiny model with
# its forward on GPU 0, in a real terminal (tmux, 120x40), captured once it has decoded for a few
# seconds. Checks that the GPUs panel is drawn from NVML (the device's name, utilisation and
# memory figures), that the header names the GPU backend, and that the throughput is positive;
# the capture is written to $OUT/dash-gpu.txt (and .ansi) for RESULTS.
# usage (repository root): tests/gpu/dash_device.sh AFF_RUN   (tmux from PATH)
set -uo pipefail
aff_run=$(realpath "${1:?usage: $0 AFF_RUN}")
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/dash-device}
mkdir -p "$out"
work=$(mktemp -d)
cd "$work" || exit 1
. "$src/tests/cli/tmux.bash"
# 4000 tokens (the model's context is 4096): a few seconds on a GPU, and the view closes when
# the run ends, so frames are taken every half second while it decodes, the last one kept.
pane_start 120 40 "env -u LD_LIBRARY_PATH LANG=C.UTF-8 '$aff_run' -m '$src/tests/data/models/tiny-trained' -p 'Once upon a time' -n 4000 --ignore-eos --temp 0 --gpus 1 --ui dash"
failed=0
pane_frames "$out/dash-gpu" 120 'decode +[1-9][0-9]*\.[0-9] tok/s'
frames=$FRAMES
[ $frames -gt 0 ] || { echo "FAIL dash: no frame with a decode rate; the pane:"; pane_text; exit 1; }
echo "dash: $frames frames taken"
pane_keys q
shot=$out/dash-gpu.txt
check() {  # check DESCRIPTION REGEX
  if grep -Eq -- "$2" "$shot"; then echo "PASS dash: $1"; else echo "FAIL dash: $1 (/$2/)"; failed=1; fi
}
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -1)
check "a GPUs panel" '─ GPUs'
check "the device's name from NVML ($gpu_name)" "${gpu_name:-H200}"
check "utilisation, power and clock figures from NVML" '0 +[0-9]+% .* [0-9]+ W +[0-9]+ MHz'
check "the header names the GPU forward" '^ aff-run \| tiny-trained \| .*GPU'
check "a positive decode rate" 'decode +[1-9][0-9]*\.[0-9] tok/s'
cat "$shot"
exit $failed
