# Ids the model has but the tokenizer lacks (DeepSeek: 128815-129279): one forced (or
# sampled) prints nothing and the run goes on (it used to abort mid-output). Here id 255
# lacks text.
python3 "$SRC/tests/cli/aff-run/byte_tokenizer.py" tok.json --lacking 255
aff-run -m "$DATA/models/tiny-a" --tokenizer tok.json --tokens 0,5 --force-tokens 72,255,105 --no-echo 2>err
grep -q '^aff-run: prefill 2 tokens' err
