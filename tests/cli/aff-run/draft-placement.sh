# --draft-placement auto|vram|ram (libaff/ui/cli.cpp add_gpu): any other value is refused with
# the line naming the option and the usage status, before the model is loaded. On the CPU
# path (--gpus 0) it is taken and ignored: the drafts and the output are those without it.
for bad in "--draft-placement host" "--draft-placement VRAM" "--draft-placement"; do
  # shellcheck disable=SC2086
  aff-run -m "$DATA/models/tiny-a" --tokens 0 -n 1 $bad 2>err >/dev/null || echo "status $?"
  head -1 err
done
model="$DATA/models/tiny-trained"
aff-run -m "$model" -p "def f" -n 12 --temp 0 --gpus 0 --draft mtp --no-echo >plain 2>/dev/null
for where in vram ram auto; do
  aff-run -m "$model" -p "def f" -n 12 --temp 0 --gpus 0 --draft mtp --no-echo --draft-placement $where >placed 2>placed.err
  cmp plain placed && grep -q '^aff-run: drafts: mtp' placed.err && echo "$where same"
done
