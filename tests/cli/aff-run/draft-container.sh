# A draft container (aff-quantize --dspark) holds only the MTP stage: aff-run refuses it
# with one line until speculative decoding exists.
aff-quantize --src "$DATA/models/tiny-a-fp8" --out m.aff --progress never 2>/dev/null
aff-quantize --dspark --codebook m.aff --src "$DATA/models/tiny-a-fp8" --out d.aff --progress never 2>/dev/null
aff-run -m d.aff --tokens 1
