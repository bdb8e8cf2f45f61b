# Checkpoints aff-run would refuse are refused before anything is written (they used to
# quantise with status 0 into a container aff-verify passed): a missing tensor, tid2eid
# ids outside the experts, a config whose geometry the tensors do not have. Each: status
# 1, one line naming the file and the tensor, no output file.
m="$SRC/tests/cli/aff-quantize/mutate_checkpoint.py"
t="$DATA/models/tiny-a"
python3 "$m" "$t" missing drop model.layers.2.attn.wq_a.weight
python3 "$m" "$t" tid2eid fill model.layers.1.ffn.gate.tid2eid 6300000000000000
python3 "$m" "$t" geometry config moe_intermediate_size 128
python3 "$m" "$t" shared drop model.layers.4.ffn.shared_experts.w2.weight
for ck in missing tid2eid geometry shared; do
  status=0
  aff-quantize --src $ck --out $ck.aff --progress never --gpus 0 2>err || status=$?
  echo "$ck: status $status: $(cat err)"
  [ ! -e $ck.aff ] || echo "$ck.aff was written"
done
ls -A | grep -v -x -e missing -e tid2eid -e geometry -e shared -e err -e stdout -e stderr || echo 'no other file'
