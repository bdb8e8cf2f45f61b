# The heat mover's knobs (--placement-moves, --placement-decay, --placement-hysteresis,
# --placement-min-gain, --placement-lead, --placement-shadow; libaff/ui/cli.cpp
# add_placement_knobs) refuse a bad value with one line naming the option and the usage
# status, before the model is loaded: moves and shadow whole numbers from 1 to 4096, decay
# and lead numbers above 0, hysteresis and min-gain numbers of 0 or more (nothing that is not
# a finite number).
for bad in "--placement-moves 0" "--placement-moves 1.5" "--placement-shadow 4097" "--placement-decay 0" \
           "--placement-decay -2" "--placement-lead 0" "--placement-hysteresis -0.1" "--placement-min-gain x" \
           "--placement-min-gain inf" "--placement-decay nan"; do
  # shellcheck disable=SC2086
  aff-run -m "$DATA/models/tiny-a" --tokens 0 -n 1 $bad 2>err >/dev/null || echo "status $?"
  head -1 err
done
# Good values are taken; on the CPU path (--gpus 0) the tiers do not apply and the output is the same.
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 -n 3 --temp 0 --gpus 0 --no-echo >plain 2>/dev/null
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 -n 3 --temp 0 --gpus 0 --no-echo --placement-moves 2 \
  --placement-decay 8.5 --placement-hysteresis 0 --placement-min-gain 0 --placement-lead 16 --placement-shadow 1 \
  >knobs 2>/dev/null
cmp plain knobs && echo same
