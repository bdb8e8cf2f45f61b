# A tensor directory running past the end of the file: named with its offset and size.
cp "$DATA/bad/directory-past-eof.aff" .
aff-verify -q directory-past-eof.aff
