# No --out: bad usage, status 2.
aff-quantize --src "$DATA/models/tiny-b"
