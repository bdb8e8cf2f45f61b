# aff-serve takes the heat mover's knobs as aff-run does (libaff/ui/cli.cpp
# add_placement_knobs): a bad value is refused with the line naming the option and the usage
# status.
for bad in "--placement-moves 0" "--placement-decay 0" "--placement-hysteresis -1" "--placement-shadow lots"; do
  # shellcheck disable=SC2086
  aff-serve --test-engine --port 0 $bad 2>err >/dev/null || echo "status $?"
  head -1 err
done
