# A file that is not an .aff container: refused by its magic, status 1.
cp "$DATA/bad/wrong-magic.aff" .
aff-verify -q wrong-magic.aff
