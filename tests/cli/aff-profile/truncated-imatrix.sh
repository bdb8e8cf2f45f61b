# A cut GGUF imatrix fails with one line naming the file, never a crash.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf m.imatrix.gguf
head -c 300 m.imatrix.gguf > cut.gguf
aff-profile --imatrix cut.gguf
