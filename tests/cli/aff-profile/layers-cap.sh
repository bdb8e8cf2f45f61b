# --layers 1 keeps layer 0 and says what it dropped.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf m.imatrix.gguf
aff-profile --imatrix m.imatrix.gguf --layers 1 --top 0 2>&1 >/dev/null | grep ignored
aff-profile --imatrix m.imatrix.gguf --layers 1 --top 0 -q
