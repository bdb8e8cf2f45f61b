# A bad sampling value is refused by name before the model loads (the model path does
# not exist, so reaching the load would give another message); both spellings of the
# temperature are one option.
for flag in --temp --temperature; do
  if aff-run -m does-not-exist -p hi $flag -1 2>err; then exit 1; fi
  cat err
done
if aff-run -m does-not-exist -p hi --top-p 1.5 2>err; then exit 1; fi
cat err
if aff-run -m does-not-exist -p hi -n gl 2>err; then exit 1; fi
cat err
