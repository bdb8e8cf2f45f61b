cp "$DATA/bad/directory-past-eof.aff" .
aff-verify -q directory-past-eof.aff
