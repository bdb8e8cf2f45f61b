cp "$DATA/bad/flipped-byte.aff" .
aff-verify -q flipped-byte.aff
