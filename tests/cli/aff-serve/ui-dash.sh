# aff-serve's live view in a real terminal (tmux, 80x24), serving the tiny fixture on the
# CPU: the Log panel carries the start-up lines (the port is read from it), the Requests
# panel shows a finished request and a running one with their figures, and Ctrl-C closes
# the view with the terminal restored and status 130.
. "$SRC/tests/cli/aff-serve/server.bash"
. "$SRC/tests/cli/tmux.bash"
byte_tokenizer tok.json
pane_start 80 24 "LANG=C.UTF-8 aff-serve --port 0 -m '$DATA/models/tiny-a' --tokenizer tok.json --threads 1 --gpus 0 --ui dash;" \
  "echo status=\$? >'$PWD/status'; stty -a >'$PWD/stty.after'"
pane_wait 'aff-serve: ready: tiny-a loaded'
port=$(pane_text | sed -n 's|.*listening on http://127.0.0.1:\([0-9][0-9]*\).*|\1|p')
[ -n "$port" ]
BASE=http://127.0.0.1:$port
curl -s "$BASE/v1/completions" -o short.json -d '{"max_tokens": 5, "temperature": 0, "prompt": "abc"}'
[ "$(json_get short.json 'j.usage.completion_tokens')" = 5 ]
# A long one, running while the pane is read.
curl -s "$BASE/v1/completions" -o long.json -d '{"max_tokens": 3000, "temperature": 0, "prompt": "abcdef"}' &
curl_pid=$!
pane_wait '^ +2  running +7 +[0-9]+ +[1-9][0-9]* +[0-9.]+$'
pane_text > shot.txt
head -1 shot.txt | grep -q '^ aff-serve | tiny-a | cpu: the reference forward'
grep -qF '─ Requests ─ queued 0  running 1  done 1 ─' shot.txt
grep -Eq '^ +1  done +4 +0 +5 +[0-9.]+$' shot.txt  # 4 prompt tokens (BOS + abc), 5 generated
grep -qF 'aff-serve: POST /v1/completions 200 prompt=4 cached=0 completion=5' shot.txt
# tiny-a has no MTP layer: drafts off; the CPU forward: every expert in host memory.
for panel in '─ Throughput ─' '─ Drafts ─ off ─' '─ Tiers ─ all resident (CPU) ─' '─ Expert plane ─ 6 layers x 8 experts ─'; do
  grep -qF -- "$panel" shot.txt || { echo "missing: $panel"; cat shot.txt; exit 1; }
done
pane_styled | grep 'running' | grep -q $'\e\\[32m'  # the running row is green
[ "$(pane_width)" -le 80 ]
pane_keys C-c
for _ in $(seq 100); do [ -s status ] && break; sleep 0.1; done
grep -qx 'status=130' status
grep -Eq '(^| )icanon( |$)' stty.after
grep -Eq '(^| )echo( |$)' stty.after
[ "$(tmx display -p -t view '#{alternate_on}')" = 0 ]
wait $curl_pid || true
