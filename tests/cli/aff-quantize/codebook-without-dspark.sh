aff-quantize --src "$DATA/models/tiny-b" --out m.aff --codebook other.aff
