# A profile file with a flipped byte fails its digest.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf m.imatrix.gguf
aff-profile --imatrix m.imatrix.gguf --out p.afp -q > /dev/null
printf '\x07' | dd of=p.afp bs=1 seek=40 conv=notrunc status=none
aff-profile p.afp
