# A container of a newer format version: refused, naming both versions.
cp "$DATA/bad/newer-version.aff" .
aff-verify -q newer-version.aff
