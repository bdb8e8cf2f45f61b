# --codebook belongs to --dspark only: refused as bad usage before any work.
aff-quantize --src "$DATA/models/tiny-b" --out m.aff --codebook other.aff
