# --parts of a plain file with one part changed: that part and the whole FAILED against SHA256SUMS.
printf 'hello' > f.bin
aff-split -q --max-size 2 f.bin >/dev/null
printf 'j' | dd of=f.bin.part-00002-of-00003 bs=1 seek=0 conv=notrunc status=none
aff-verify -q --parts f.bin.part-00001-of-00003
