# -c with one part changed: that part FAILED, the count of mismatches on stderr, status 1.
cp "$DATA/tiny.aff" .
aff-split -q --max-size 8KiB tiny.aff >/dev/null
printf 'X' | dd of=tiny.aff.part-00002-of-00003 bs=1 seek=100 conv=notrunc status=none
aff-verify -q -c SHA256SUMS
