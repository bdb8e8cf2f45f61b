# --logits-out writes one record per prompt and generated position (formats/logits.md).
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9 --force-tokens 4,5 --logits-out l.bin -q >/dev/null
# header 32 bytes + 5 records of 16 + 4·256 bytes
[ "$(stat -c %s l.bin)" = $((32 + 5 * (16 + 1024))) ]
[ "$(head -c 8 l.bin)" = AFFLOGIT ]
