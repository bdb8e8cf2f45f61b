# --layers past the checkpoint's layer count: refused, naming the count.
aff-quantize --src "$DATA/models/tiny-b" --out m.aff --layers 4
