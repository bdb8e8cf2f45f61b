# --gpus 0 runs the CPU reference and says so; --gpus 1 on a machine or build without a GPU
# fails with one line naming why (a CPU-only build: exit 2, no GPU support; a GPU build with
# no visible device: exit 1, how many are visible). The default picks the CPU here too.
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 -n 2 --temp 0 --gpus 0 2>err >/dev/null
grep -qx 'aff-run: cpu: the reference forward' err
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 -n 2 --temp 0 --gpu-mib 100 2>err >/dev/null
grep -q '^aff-run: cpu: the reference forward$' err || grep -q '^aff-run: GPU 0 ' err
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 -n 2 --gpus 0 -q 2>err >/dev/null
! grep -q 'reference forward' err
set +e
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 -n 2 --gpus 1 2>err >/dev/null
status=$?
set -e
if [ $status = 2 ]; then
  [ "$(cat err)" = "aff-run: --gpus 1: this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0" ]
elif [ $status = 1 ]; then
  grep -qx 'aff-run: 1 GPU(s) asked for, 0 visible (CUDA_VISIBLE_DEVICES=.*)' err
else
  [ $status = 0 ] && grep -q '^aff-run: GPU 0 ' err  # a machine with a GPU
fi
# --gpus 2 splits the layers across two GPUs where two are visible; elsewhere one line says
# why not (no GPU support, or how many GPUs are visible).
set +e
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 -n 2 --temp 0 --gpus 2 2>err >/dev/null
status=$?
set -e
if [ $status = 2 ]; then
  [ "$(cat err)" = "aff-run: --gpus 2: this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0" ]
elif [ $status = 1 ]; then
  grep -qx 'aff-run: 2 GPU(s) asked for, [01] visible (CUDA_VISIBLE_DEVICES=.*)' err
else
  [ $status = 0 ] && grep -q '^aff-run: GPU 0 (.*), GPU 1 (.*); .*layers 0-[0-9]* on GPU 0' err
fi
