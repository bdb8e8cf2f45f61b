# A container made by aff-quantize runs on the CPU path: the same prompt and forced
# continuation as on the checkpoint give a logits file of the same shape, and greedy
# decoding prints the prompt and the generated ids. (Their closeness to the checkpoint's
# logits is asserted in tests/unit/model/quantised_quality_test.cpp.)
aff-quantize --src "$DATA/models/tiny-a" --out q.aff --progress never 2>/dev/null
aff-run -m q.aff --tokens 0,5,9 --force-tokens 4,5 --logits-out q.logits -q >/dev/null
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 --force-tokens 4,5 --logits-out o.logits -q >/dev/null
[ "$(stat -c %s q.logits)" = $((32 + 5 * (16 + 1024))) ]
[ "$(stat -c %s o.logits)" = "$(stat -c %s q.logits)" ]
if cmp -s q.logits o.logits; then echo "quantised logits equal the original"; exit 1; fi
aff-run -m q.aff --tokens 0,5,9 -n 4 --temp 0 -q > out.txt 2>/dev/null
[ "$(wc -w < out.txt)" = 7 ]
