# -c with a listed file gone: reported as unreadable, status 1.
cp "$DATA/tiny.aff" .
aff-split -q --max-size 8KiB tiny.aff >/dev/null
rm tiny.aff
aff-verify -q -c SHA256SUMS
