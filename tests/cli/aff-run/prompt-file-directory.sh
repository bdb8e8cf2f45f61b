# --prompt-file naming a directory: one error line and status 2 before the model loads
# (it used to run an empty prompt and exit 0).
python3 "$SRC/tests/cli/aff-run/byte_tokenizer.py" tok.json
mkdir prompts
aff-run -m "$DATA/models/tiny-a" --tokenizer tok.json --prompt-file prompts -n 1
