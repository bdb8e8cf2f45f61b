# Speculative decoding with DSpark drafts on the random checkpoint with mtp.0..2 DSpark stages
# (tests/common/random_dspark_checkpoint.hpp, written by the dspark_model fixture): greedy
# tokens and every position's logits (--logits-out) with drafts of up to 1..5 tokens are byte
# for byte those without (--draft off), on the checkpoint and on the aff-quantize'd main
# container with its draft container (found beside it as <stem>.dspark.aff, or given with
# --draft-model); stderr names the drafter and ends with the acceptance line. auto picks
# DSpark when the stages are there. The random drafter's acceptance is not judged.
model="$AFF_DSPARK_MODEL_DIR"
tokens=0,5,9,300,17,33,2,800,45,61,7,12,90,111,3,4,5,6,700,21
run() { aff-run --tokens $tokens -n 24 --temp 0 --gpus 0 --ignore-eos --dump-tokens "$@"; }
ids() { sed -n 's/^generated tokens://p' "$1"; }

run -m "$model" --draft off --logits-out plain.logits >/dev/null 2>plain.err
grep -qx 'aff-run: drafts off' plain.err
[ -n "$(ids plain.err)" ]
for k in 1 2 3 4 5; do
  run -m "$model" --draft dspark --draft-max $k --logits-out drafted.logits >/dev/null 2>drafted.err
  cmp plain.logits drafted.logits
  [ "$(ids plain.err)" = "$(ids drafted.err)" ]
  grep -qx "aff-run: drafts: dspark, up to $k a step" drafted.err
  grep -Eq "^aff-run: drafts: [0-9]+ verify calls, [0-9.]+ of [1-$k] accepted on average" drafted.err
done
# More than γ = 5 asked: at most 5.
run -m "$model" --draft dspark --draft-max 8 >/dev/null 2>eight.err
grep -qx 'aff-run: drafts: dspark, up to 5 a step' eight.err
run -m "$model" >/dev/null 2>auto.err
grep -qx 'aff-run: drafts: dspark, up to 3 a step, while faster than without' auto.err
[ "$(ids plain.err)" = "$(ids auto.err)" ]

# The containers: the main one, and the stages against its codebook.
aff-quantize --src "$model" --out m.aff --progress never 2>/dev/null
aff-quantize --dspark --codebook m.aff --src "$model" --out m.dspark.aff --progress never 2>/dev/null
run -m m.aff --draft off --logits-out cplain.logits >/dev/null 2>cplain.err
for k in 1 3 5; do
  run -m m.aff --draft dspark --draft-max $k --logits-out cdrafted.logits >/dev/null 2>cdrafted.err
  cmp cplain.logits cdrafted.logits
  [ "$(ids cplain.err)" = "$(ids cdrafted.err)" ]
  grep -qx "aff-run: drafts: dspark, up to $k a step" cdrafted.err
done
mv m.dspark.aff stages.aff
run -m m.aff >/dev/null 2>nodraft.err
grep -qx 'aff-run: drafts off (the model has no MTP layer)' nodraft.err
run -m m.aff --draft-model stages.aff --draft dspark --logits-out given.logits >/dev/null 2>given.err
cmp cplain.logits given.logits
grep -qx 'aff-run: drafts: dspark, up to 3 a step' given.err
