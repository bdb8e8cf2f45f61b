aff-quantize --src "$DATA/models/tiny-b" --out m.aff --layers 4
