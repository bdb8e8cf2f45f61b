cp "$DATA/bad/overlapping-tensors.aff" .
aff-verify -q overlapping-tensors.aff
