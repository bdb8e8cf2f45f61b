# --out naming a directory: refused before any quantising, status 2.
mkdir target
aff-quantize --src "$DATA/models/tiny-b" --out target
