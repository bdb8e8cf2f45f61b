# Without SHA256SUMS the container inside the parts is still checked: the flipped
# byte is named by tensor.
cp "$DATA/bad/flipped-byte.aff" tiny.aff
aff-split -q --max-size 8KiB tiny.aff >/dev/null
rm SHA256SUMS tiny.aff
aff-verify -q --parts tiny.aff.part-00001-of-00003
