# The parts are checked against SHA256SUMS and, being a container, mapped end to end
# and validated with every tensor digest; nothing is written.
cp "$DATA/tiny.aff" .
aff-split -q --max-size 8KiB tiny.aff >/dev/null
rm tiny.aff
aff-verify -q --parts tiny.aff.part-00003-of-00003
ls -I stdout -I stderr
