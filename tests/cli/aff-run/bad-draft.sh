# Bad --draft and --draft-max values are refused by name before the model loads (the model
# path does not exist, so reaching the load would give another message), and --draft mtp on a
# model without an MTP layer once the model shows it has none.
for args in "--draft maybe" "--draft-max 0" "--draft-max 17" "--draft-max two"; do
  if aff-run -m does-not-exist -p hi $args 2>err; then exit 1; fi
  cat err
done
set +e
aff-run -m "$DATA/models/tiny-a" --tokens 0,1 -n 2 --draft mtp --gpus 0 2>err
echo "status $?"
set -e
cat err
