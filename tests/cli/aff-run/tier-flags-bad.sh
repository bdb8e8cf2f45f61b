# The expert tiers' options (--gpu-expert-mib, --gpu-headroom-mib, --host-pool-mib,
# --host-pool-reserve-mib: whole numbers of MiB; --placement-strategy: a strategy the mover
# runs; --expert-profile: an existing file) refuse a bad value with the line naming the
# option and the usage status, before the model is loaded. belady needs the future (trace
# replay only), so the mover does not take it.
for bad in "--placement-strategy belady" "--placement-strategy HEAT" "--gpu-expert-mib -1" "--host-pool-mib lots" \
           "--host-pool-reserve-mib 1.5" "--gpu-headroom-mib x" "--gpu-mib -3" "--expert-profile missing.prof"; do
  # shellcheck disable=SC2086
  aff-run -m "$DATA/models/tiny-a" --tokens 0 -n 1 $bad 2>err >/dev/null || echo "status $?"
  head -1 err
done
# Good values are taken; on the CPU path (--gpus 0) the tiers do not apply and the output is the same.
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 -n 3 --temp 0 --gpus 0 --no-echo >plain 2>/dev/null
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 -n 3 --temp 0 --gpus 0 --no-echo --placement-strategy static \
  --gpu-expert-mib 0 --host-pool-mib 64 --host-pool-reserve-mib 0 --gpu-headroom-mib 0 >tiers 2>/dev/null
cmp plain tiers && echo same
