# The short spellings: -s is --seed, -f is --prompt-file, -c is --ctx-size, -n32 is -n 32;
# --temp and --temperature are one option. Same tokens either way.
a=$(aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9,33 -n 6 --temp 0.8 --seed 3 --no-echo 2>/dev/null)
b=$(aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9,33 -n6 --temperature 0.8 -s 3 -c 64 --no-echo 2>/dev/null)
[ "$a" = "$b" ]
[ "$(echo "$a" | wc -w)" = 6 ]
# A prompt and reply that pass -c are refused before generating.
if aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9,33 -n 8 -c 10 2>err; then exit 1; fi
cat err
# -f reads the prompt file before loading: a missing one fails first.
if aff-run -m does-not-exist -f no-such-prompt.txt 2>err; then exit 1; fi
cat err
