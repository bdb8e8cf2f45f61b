aff-verify -c SHA256SUMS x.aff
