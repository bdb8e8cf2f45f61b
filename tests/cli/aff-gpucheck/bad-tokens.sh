# --tokens out of range is a usage error.
aff-quantize --src "$DATA/models/tiny-a" --out m.aff --progress never 2>/dev/null
aff-gpucheck -m m.aff --tokens 0
