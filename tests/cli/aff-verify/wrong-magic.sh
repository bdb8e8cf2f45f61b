cp "$DATA/bad/wrong-magic.aff" .
aff-verify -q wrong-magic.aff
