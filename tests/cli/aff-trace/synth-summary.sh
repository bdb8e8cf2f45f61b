# The tiny synthetic family: the worked example of formats/route-trace.md §8 (its first
# 72 bytes are the header: magic, version 1, 2 layers, 8 experts, top-2, identity kind 3
# with the seed, 4096-byte experts, layer 0 hashed) and its summary.
aff-trace synth --family tiny --compression none --out t.aft
od -A d -t x1 -N 64 t.aft
aff-trace summary t.aft
