# aff-serve takes the expert tiers' options as aff-run does (libaff/ui/cli.cpp add_gpu): a
# bad value is refused with the line naming the option and the usage status.
for bad in "--placement-strategy belady" "--host-pool-mib lots" "--gpu-expert-mib -1"; do
  # shellcheck disable=SC2086
  aff-serve --test-engine --port 0 $bad 2>err >/dev/null || echo "status $?"
  head -1 err
done
