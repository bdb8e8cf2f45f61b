# Bad draft set-ups, each one line and a non-zero status: --draft dspark on a model without
# DSpark stages; a draft container whose config (geometry) is not the main container's; a
# --draft-model that is a main container; --draft-model beside a checkpoint directory; an
# unknown --draft value.
model="$AFF_DSPARK_MODEL_DIR"
expect() {  # STATUS PATTERN ARGS...: the run fails with STATUS and stderr's one line matches PATTERN
  local status=$1 pattern=$2
  shift 2
  set +e
  aff-run --tokens 0,1,2 -n 2 --temp 0 --gpus 0 "$@" >/dev/null 2>err
  local got=$?
  set -e
  [ "$got" = "$status" ] || { echo "status $got, expected $status: $*"; cat err; exit 1; }
  [ "$(grep -c . err)" = 1 ] || { echo "more than one line: $*"; cat err; exit 1; }
  grep -Eq "$pattern" err || { echo "unexpected message: $*"; cat err; exit 1; }
}
expect 2 '^aff-run: --draft dspark: the model has no DSpark stages \(give their draft container with --draft-model, or put it beside the main one as <model>\.dspark\.aff\)$' \
  -m "$DATA/models/tiny-a-fp8" --draft dspark

aff-quantize --src "$model" --out m.aff --progress never 2>/dev/null
aff-quantize --src "$DATA/models/tiny-a-fp8" --out other.aff --progress never 2>/dev/null
aff-quantize --dspark --codebook other.aff --src "$DATA/models/tiny-a-fp8" --out other.dspark.aff --progress never 2>/dev/null
expect 1 "^aff-run: other\.dspark\.aff: the draft container's config is not the main container's \(another model, or other --layers\): its geometry does not match$" \
  -m m.aff --draft-model other.dspark.aff
expect 1 '^aff-run: other\.aff: not a draft container \(its metadata role is not "draft"; aff-quantize --dspark writes one\)$' \
  -m m.aff --draft-model other.aff
expect 2 '^aff-run: --draft-model: the model is a checkpoint directory, which carries its own mtp\.\* tensors; a draft container pairs with a main \.aff container$' \
  -m "$model" --draft-model other.dspark.aff
expect 1 '^aff-run: missing\.aff: ' -m m.aff --draft-model missing.aff
set +e
aff-run -m m.aff --tokens 0 --draft sometimes 2>err
status=$?
set -e
[ $status = 2 ]
grep -q 'sometimes' err
