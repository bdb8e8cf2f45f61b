# --gpus 0 (searches on the CPU threads) writes the bytes of the default run (on a GPU
# when one is visible): where the search runs is no input (tests/gpu compares the two on
# a GPU for every fixture, with an imatrix too).
export SOURCE_DATE_EPOCH=1764374400
aff-quantize --src "$DATA/models/tiny-b" --out default.aff -q
aff-quantize --src "$DATA/models/tiny-b" --out cpu.aff --gpus 0 -q
cmp default.aff cpu.aff && echo same
