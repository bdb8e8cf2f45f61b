# An expert matrix holding NaN, infinity, or a finite value too large for the quantiser
# (the largest BF16, 3.4e38): one line naming the file, the tensor, the row and column,
# status 1, nothing written.
python3 "$SRC/tests/cli/aff-quantize/make_checkpoint.py" big "$DATA" small 256
m="$SRC/tests/cli/aff-quantize/mutate_checkpoint.py"
for v in nan:c07f inf:807f huge:7f7f; do
  name=${v%%:*}
  python3 "$m" small $name first layers.0.ffn.experts.1.w3.weight ${v#*:}
  status=0
  aff-quantize --src $name --out $name.aff --progress never --gpus 0 2>err || status=$?
  echo "$name: status $status: $(cat err)"
  [ ! -e $name.aff ] || echo "$name.aff was written"
done
