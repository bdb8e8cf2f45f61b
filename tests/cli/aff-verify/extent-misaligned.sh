cp "$DATA/bad/extent-misaligned.aff" .
aff-verify -q extent-misaligned.aff
