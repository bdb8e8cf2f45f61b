# An imatrix holding a matrix DeepSeek-V4 does not have (attn_qkv): the profile is still
# made from the expert tensors, and one warning names the foreign tensor.
python3 "$SRC/tests/cli/aff-profile/make_imatrix.py" foreign m.imatrix.gguf
aff-profile --imatrix m.imatrix.gguf --top 0 --progress never >/dev/null
