# sha256sum escapes a backslash in a name and marks the line with a leading '\'.
printf 'abc' > 'a\b'
sha256sum 'a\b' > SHA256SUMS
cat SHA256SUMS
aff-verify -q -c SHA256SUMS
