# As with sha256sum: ignoring every missing file leaves nothing verified, which fails.
echo "e8dfe3b818925b655d8823606673b0bfd7dc987b3991e8af6a30db0999653f1b  gone.bin" > SHA256SUMS
aff-verify -q -c SHA256SUMS --ignore-missing
