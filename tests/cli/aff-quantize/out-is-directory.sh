mkdir target
aff-quantize --src "$DATA/models/tiny-b" --out target
