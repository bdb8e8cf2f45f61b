# -c over the SHA256SUMS aff-split wrote: every part and the whole container OK.
cp "$DATA/tiny.aff" .
aff-split -q --max-size 8KiB tiny.aff >/dev/null
aff-verify -q -c SHA256SUMS
