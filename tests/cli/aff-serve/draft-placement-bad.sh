# aff-serve takes --draft-placement as aff-run does (libaff/ui/cli.cpp add_gpu): a value other
# than auto, vram or ram is refused with the line naming the option and the usage status.
for bad in "--draft-placement host" "--draft-placement RAM"; do
  # shellcheck disable=SC2086
  aff-serve --test-engine --port 0 $bad 2>err >/dev/null || echo "status $?"
  head -1 err
done
