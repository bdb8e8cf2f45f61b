# Piped, the live view is plain lines on stderr (--ui auto picks them, --ui plain forces
# them): key=value stats lines with no escape codes, the last one after the run with its
# final figures; stdout carries only the generated tokens.
aff-run -m "$DATA/models/tiny-a" --tokens 0,5,9,33 -n 300 --ignore-eos --temp 0 -t 1 --no-echo --ui-interval-ms 50 >out 2>err
[ "$(wc -w < out)" = 300 ]
! grep -q $'\e' out err
grep -c '^aff-run: stats ' err > count
[ "$(cat count)" -ge 1 ]
last=$(grep '^aff-run: stats ' err | tail -1)
pattern='^aff-run: stats t=[0-9.]+s prefill=[0-9.]+tok/s decode=[0-9.]+tok/s decode_1m=[0-9.]+tok/s ttft=[0-9]+ms'
pattern+=' prompt=4 cached=0 generated=300 queued=0 running=0 done=1 drafts=off tiers=all-resident-CPU$'
[[ $last =~ $pattern ]] || { echo "unexpected: $last"; exit 1; }
rate=$(echo "$last" | sed 's/.* decode_1m=\([0-9.]*\)tok.*/\1/')
awk -v r="$rate" 'BEGIN { exit !(r > 0) }'
# The closing line is unchanged and comes after the stats.
tail -1 err | grep -q '^aff-run: prefill 4 tokens .* tok/s, decode 300 tokens [0-9.]* tok/s, first token after'
# --ui plain: the same lines; --quiet: none.
aff-run -m "$DATA/models/tiny-a" --tokens 0,5 -n 3 --temp 0 --ui plain 2>err2 >/dev/null
grep -q '^aff-run: stats .* generated=3 ' err2
aff-run -m "$DATA/models/tiny-a" --tokens 0,5 -n 3 --temp 0 --quiet 2>err3 >/dev/null
! grep -q 'stats' err3
