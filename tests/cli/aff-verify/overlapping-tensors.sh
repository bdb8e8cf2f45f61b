# Two tensors sharing bytes: both named, status 1.
cp "$DATA/bad/overlapping-tensors.aff" .
aff-verify -q overlapping-tensors.aff
