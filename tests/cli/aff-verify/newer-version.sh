cp "$DATA/bad/newer-version.aff" .
aff-verify -q newer-version.aff
