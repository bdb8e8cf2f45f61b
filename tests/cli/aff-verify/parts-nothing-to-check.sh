# --parts of a plain file without its SHA256SUMS: nothing to check against, said plainly, status 1.
printf 'hello' > f.bin
aff-split -q --max-size 2 f.bin >/dev/null
rm SHA256SUMS
aff-verify -q --parts f.bin.part-00001-of-00003
