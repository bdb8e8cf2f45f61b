cp "$DATA/tiny.aff" .
aff-verify -q tiny.aff
