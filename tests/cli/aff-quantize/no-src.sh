# No --src: bad usage, status 2.
aff-quantize --out m.aff
