# A container and -c at once: bad usage, status 2.
aff-verify -c SHA256SUMS x.aff
