# Parts whose concatenation is a damaged container fail with the reader's message.
cp "$DATA/bad/truncated.aff" tiny.aff
aff-split -q --max-size 8KiB tiny.aff >/dev/null
rm SHA256SUMS
aff-verify -q --parts tiny.aff.part-00001-of-00002
