# An expert extent for an expert the config does not have: named with the config's count.
cp "$DATA/bad/expert-out-of-range.aff" .
aff-verify -q expert-out-of-range.aff
