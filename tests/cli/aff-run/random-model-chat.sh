# --chat on the random checkpoint with the real tokenizer (ctest fixtures: AFF_MODEL_DIR,
# AFF_TOKENIZER_JSON): two user turns from standard input, -cnv as the alias. The second
# turn runs only its new tokens (what the sequence holds is a prefix of the rendered
# conversation), its prompt is longer, and the replies repeat at temperature 0.
run() {
  printf 'Hello there\nAnd a second question\n' |
    aff-run -m "$AFF_MODEL_DIR" --tokenizer "$AFF_TOKENIZER_JSON" "$@" --system "Be brief." -n 6 --temp 0 -t 2
}
run --chat >out1 2>err1
run -cnv >out2 2>err2
cmp out1 out2
turns=$(grep -c '^aff-run: [0-9]* prompt tokens' err1)
[ "$turns" = 2 ]
first=$(grep '^aff-run: [0-9]* prompt tokens' err1 | sed -n 1p)
second=$(grep '^aff-run: [0-9]* prompt tokens' err1 | sed -n 2p)
[[ $first == *"prompt tokens (0 already run)"* ]]
p1=$(echo "$first" | awk '{print $2}') p2=$(echo "$second" | awk '{print $2}')
reused=$(echo "$second" | sed 's/.*(\([0-9]*\) already run).*/\1/')
[ "$p2" -gt "$p1" ]
[ "$reused" -gt "$p1" ]
[ "$reused" -lt "$p2" ]
grep -q '^aff-run: loaded in [0-9.]* s$' err1
# --system without --chat, and --chat with --tokens, are usage errors before loading.
if aff-run -m does-not-exist --system hi -p x 2>/dev/null; then exit 1; fi
if aff-run -m does-not-exist --chat --tokens 1,2 2>/dev/null; then exit 1; fi
echo ok
