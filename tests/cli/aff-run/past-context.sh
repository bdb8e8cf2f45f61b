# -n running past the context (tiny-a: 4096 tokens) is refused before generating; so is a
# prompt of the context's length; and a text too long for the context is refused from its
# byte length, before it is tokenised (the byte tokenizer: one byte a token at most).
. "$SRC/tests/cli/aff-serve/server.bash"  # byte_tokenizer: one token per byte
byte_tokenizer tok.json
run() { status=0; aff-run -m "$DATA/models/tiny-a" --tokenizer tok.json "$@" --no-echo 2>err >/dev/null || status=$?; echo "status $status"; cat err; }
run --tokens 0,1 -n 5000
run --tokens "$(seq -s, 0 4095 | tr -d '\n' | sed 's/[0-9]*/7/g')" -n 1
head -c 5000 /dev/zero | tr '\0' a > long.txt
run --prompt-file long.txt -n 1
run -p "$(cat long.txt)" -n 1
