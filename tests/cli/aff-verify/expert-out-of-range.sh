cp "$DATA/bad/expert-out-of-range.aff" .
aff-verify -q expert-out-of-range.aff
