# Lines of SHA256SUMS for other files survive; the split's own lines are replaced.
cp "$DATA/tiny.aff" .
echo "0000000000000000000000000000000000000000000000000000000000000000  other.bin" > SHA256SUMS
echo "1111111111111111111111111111111111111111111111111111111111111111  tiny.aff" >> SHA256SUMS
aff-split -q --max-size 16KiB tiny.aff >/dev/null
cat SHA256SUMS
