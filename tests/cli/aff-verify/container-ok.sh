# A sound container: structure and every tensor digest checked, one OK line.
cp "$DATA/tiny.aff" .
aff-verify -q tiny.aff
