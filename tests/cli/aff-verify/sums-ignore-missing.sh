cp "$DATA/tiny.aff" .
aff-split -q --max-size 8KiB tiny.aff >/dev/null
rm tiny.aff
aff-verify -q -c SHA256SUMS --ignore-missing
