# A draft container (aff-quantize --dspark) holds only the MTP stage: aff-run refuses it as
# the model with one line that says where it goes (--draft-model).
aff-quantize --src "$DATA/models/tiny-a-fp8" --out m.aff --progress never 2>/dev/null
aff-quantize --dspark --codebook m.aff --src "$DATA/models/tiny-a-fp8" --out d.aff --progress never 2>/dev/null
aff-run -m d.aff --tokens 1
