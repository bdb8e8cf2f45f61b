# An imatrix tensor name holding terminal escapes (set the window title, clear the
# screen) is echoed with those bytes written as \xHH, never raw.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" hostile m.imatrix.gguf
aff-profile --imatrix m.imatrix.gguf --top 0 --progress never >/dev/null
