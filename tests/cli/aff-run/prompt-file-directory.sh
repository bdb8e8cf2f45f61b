# --prompt-file naming a directory: one error line and status 2 before the model loads
# (it used to run an empty prompt and exit 0).
. "$SRC/tests/cli/aff-serve/server.bash"  # byte_tokenizer: one token per byte
byte_tokenizer tok.json
mkdir prompts
aff-run -m "$DATA/models/tiny-a" --tokenizer tok.json --prompt-file prompts -n 1
