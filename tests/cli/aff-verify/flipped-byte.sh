# One flipped byte in a tensor: its digest fails and the tensor is named, status 1.
cp "$DATA/bad/flipped-byte.aff" .
aff-verify -q flipped-byte.aff
