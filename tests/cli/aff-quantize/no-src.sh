aff-quantize --out m.aff
