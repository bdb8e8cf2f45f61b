# --dspark needs the codebook to encode against: refused as bad usage before any work.
aff-quantize --dspark --src "$DATA/models/tiny-a-fp8" --out d.aff
