# Greedy generation from token ids on the tiny fixture is deterministic and repeats.
a=$(aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9,33 -n 8 --temp 0 --no-echo --dump-tokens 2>err)
b=$(aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9,33 -n 8 --temp 0 --no-echo -t 1 2>/dev/null)
[ "$a" = "$b" ]
[ "$(echo "$a" | wc -w)" = 8 ]
grep -q '^prompt tokens: 0 5 9 33$' err
grep -q '^aff-run: prefill 4 tokens .* tok/s, decode 8 tokens .* tok/s' err
