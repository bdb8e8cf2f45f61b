# An imatrix made for another model (2 layers x 4 experts, 16 columns): the first
# tensor whose shape disagrees is named, and nothing is written.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf other.imatrix.gguf
status=0
aff-quantize --src "$DATA/models/tiny-b" --imatrix other.imatrix.gguf --out m.aff || status=$?
test ! -e m.aff
exit $status
