aff-quantize --dspark --src "$DATA/models/tiny-a-fp8" --out d.aff
