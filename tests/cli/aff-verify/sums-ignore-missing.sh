# -c with --ignore-missing: a listed file that is gone (the joined container) is skipped, the parts pass.
cp "$DATA/tiny.aff" .
aff-split -q --max-size 8KiB tiny.aff >/dev/null
rm tiny.aff
aff-verify -q -c SHA256SUMS --ignore-missing
