# An imatrix whose expert counts are 1e38 (no count of tokens; the profile's 64-bit sums
# would wrap): refused with the tensor and the value, status 1.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf m.imatrix.gguf
python3 - m.imatrix.gguf <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
# The first .counts tensor of layer 0's gate holds 40, 10, 0, 30: make the 10 a 1e38.
i = b.find(struct.pack("<4f", 40, 10, 0, 30))
b[i + 4:i + 8] = struct.pack("<f", 1e38)
open(sys.argv[1], "wb").write(b)
PY
aff-profile --imatrix m.imatrix.gguf --top 0 --progress never
