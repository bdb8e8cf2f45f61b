# An expert extent off the 4 KiB alignment: named with its offset.
cp "$DATA/bad/extent-misaligned.aff" .
aff-verify -q extent-misaligned.aff
