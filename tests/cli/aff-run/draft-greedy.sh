# Speculative decoding with the trained model's MTP layer: greedy output with drafts of up to
# 1, 3 and 5 tokens is byte for byte the output without (--draft off), on the checkpoint
# directory and on the .aff main container with its draft container (aff-quantize --dspark,
# made here: the repository ships none, and without it auto drafts nothing there); stderr
# names the drafter and closes with the acceptance line, whose figures are sane (some drafts
# held on average, no more than drafted, each position's acceptance a share). A sampled run
# with drafts also completes and reports acceptance.
for model in "$DATA/models/tiny-trained"; do
  aff-run -m "$model" -p 'def fibonacci(n):' -n 48 --temp 0 --gpus 0 --draft off >plain.txt 2>plain.err
  ! grep -q 'drafts:' plain.err
  grep -qx 'aff-run: drafts off' plain.err
  for k in 1 3 5; do
    aff-run -m "$model" -p 'def fibonacci(n):' -n 48 --temp 0 --gpus 0 --draft mtp --draft-max $k >drafted.txt 2>drafted.err
    cmp plain.txt drafted.txt
    grep -qx "aff-run: drafts: mtp, up to $k a step" drafted.err
    line=$(grep '^aff-run: drafts: [0-9]* verify calls' drafted.err)
    echo "$line" | grep -Eq "accepted on average \([0-9.]+ tokens a verify call\); acceptance by position( [0-9]\.[0-9]{2}){$k}$"
    echo "$line" | awk -v k=$k '{
      for (i = 1; i <= NF; i++) if ($i == "position") first = i + 1
      mean = $6
      if (!(mean > 0 && mean <= k)) exit 1
      for (i = first; i <= NF; i++) if ($i < 0 || $i > 1) exit 1
    }'
  done
done
# auto drafts (gated by speed) when the model has an MTP layer on the CPU path, not without one.
aff-run -m "$DATA/models/tiny-trained" -p 'def f' -n 8 --temp 0 --gpus 0 2>auto.err >/dev/null
grep -qx 'aff-run: drafts: mtp, up to 3 a step, while faster than without' auto.err
aff-run -m "$DATA/models/tiny-trained.aff" -p 'def f' -n 8 --temp 0 --gpus 0 2>aff.err >/dev/null
grep -qx 'aff-run: drafts off (the model has no MTP layer)' aff.err
# The container's MTP layer from its draft container, found beside it.
cp "$DATA/models/tiny-trained.aff" trained.aff
aff-quantize --dspark --codebook trained.aff --src "$DATA/models/tiny-trained" --out trained.dspark.aff --progress never 2>/dev/null
aff-run -m trained.aff -p 'def fibonacci(n):' -n 48 --temp 0 --gpus 0 --draft off >cplain.txt 2>/dev/null
for k in 1 4; do
  aff-run -m trained.aff -p 'def fibonacci(n):' -n 48 --temp 0 --gpus 0 --draft mtp --draft-max $k >cdrafted.txt 2>cdrafted.err
  cmp cplain.txt cdrafted.txt
  grep -qx "aff-run: drafts: mtp, up to $k a step" cdrafted.err
  grep -Eq '^aff-run: drafts: [0-9]+ verify calls, [0-9.]+ of' cdrafted.err
done
aff-run -m trained.aff -p 'def f' -n 8 --temp 0 --gpus 0 2>cauto.err >/dev/null
grep -qx 'aff-run: drafts: mtp, up to 3 a step, while faster than without' cauto.err
# --draft dspark on it: its draft holds an MTP layer, not DSpark stages.
set +e
aff-run -m trained.aff -p 'def f' -n 8 --temp 0 --gpus 0 --draft dspark 2>cdspark.err >/dev/null
status=$?
set -e
[ $status = 2 ]
grep -q '^aff-run: --draft dspark: the model has no DSpark stages' cdspark.err
aff-run -m "$DATA/models/tiny-a" --tokens 0,1 -n 4 --temp 0 --gpus 0 2>none.err >/dev/null
grep -qx 'aff-run: drafts off (the model has no MTP layer)' none.err
aff-run -m "$DATA/models/tiny-trained" -p 'def f' -n 32 --temp 0.8 -s 3 --gpus 0 --draft mtp 2>sampled.err >/dev/null
grep -q '^aff-run: drafts: [0-9]* verify calls' sampled.err
