# A profile made from a GGUF imatrix: per-layer summary and top experts; --out writes
# a file that reads back to the same text. The dense V4 tensor (attn_q_a) is skipped
# without a warning (stderr.exact is empty).
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" gguf m.imatrix.gguf
aff-profile --imatrix m.imatrix.gguf --out p.afp --top 2 --progress never
aff-profile p.afp --top 2 > again.txt
aff-profile --imatrix m.imatrix.gguf --top 2 2>/dev/null | cmp - again.txt
wc -c < p.afp
