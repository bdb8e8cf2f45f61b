# A cut GGUF imatrix fails with one line naming the file and the offset, never a crash.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf full.gguf
head -c 200 full.gguf > cut.gguf
aff-quantize --src "$DATA/models/tiny-b" --imatrix cut.gguf --out m.aff
