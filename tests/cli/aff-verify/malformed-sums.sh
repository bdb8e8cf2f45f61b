# A SHA256SUMS line that is not a checksum line: named by line number, status 1.
cp "$DATA/tiny.aff" .
sha256sum tiny.aff > SHA256SUMS
echo "e8dfe3b8  tiny.aff" >> SHA256SUMS
aff-verify -q -c SHA256SUMS
