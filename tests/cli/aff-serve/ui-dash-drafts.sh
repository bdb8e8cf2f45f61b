# aff-serve's Drafts panel in a real terminal (tmux, 80x24), serving the trained tiny fixture
# on the CPU with MTP drafts: after two requests its figures are those /metrics renders,
# summed over both generations (verify calls, accepted of drafted tokens, accepted tokens a
# verify call), and a running request moves them on live. q closes the view (status 130).
. "$SRC/tests/cli/aff-serve/server.bash"
. "$SRC/tests/cli/tmux.bash"
pane_start 80 24 "LANG=C.UTF-8 aff-serve --port 0 -m '$DATA/models/tiny-trained' --threads 1 --gpus 0 --draft mtp --ui dash;" \
  "echo status=\$? >'$PWD/status'"
pane_wait 'aff-serve: ready: tiny-trained loaded'
grep -qF '─ Drafts ─ no verify call yet ─' <(pane_text)  # drafts on, none verified before a request
port=$(pane_text | sed -n 's|.*listening on http://127.0.0.1:\([0-9][0-9]*\).*|\1|p')
[ -n "$port" ]
BASE=http://127.0.0.1:$port
for prompt in 'Once upon a time' 'def fibonacci(n):'; do
  curl -s "$BASE/v1/completions" -o reply.json -d "{\"max_tokens\": 60, \"temperature\": 0, \"prompt\": \"$prompt\"}"
  [ "$(json_get reply.json 'j.usage.completion_tokens')" = 60 ]
done
curl -s "$BASE/metrics" -o metrics.txt
value() { sed -n "s/^$1 //p" metrics.txt; }
calls=$(value aff_draft_verify_calls_total) drafted=$(value aff_draft_tokens_total) accepted=$(value aff_draft_accepted_tokens_total)
[ "$calls" -gt 0 ] && [ "$drafted" -ge "$calls" ]
rate=$(awk -v a="$accepted" -v d="$drafted" 'BEGIN { printf "%.1f", 100 * a / d }')
mean=$(awk -v a="$accepted" -v c="$calls" 'BEGIN { printf "%.2f", a / c }')
pane_wait "─ Drafts ─ $calls verify calls ─"
pane_text > shot.txt
grep -qF "accepted $rate %  mean length $mean" shot.txt || { echo "want accepted $rate % mean $mean:"; cat shot.txt; exit 1; }
grep -qF '─ Requests ─ queued 0  running 0  done 2 ─' shot.txt
# A long request: the verify calls climb while it runs.
curl -s "$BASE/v1/completions" -o long.json -d '{"max_tokens": 2000, "temperature": 0, "prompt": "import"}' &
curl_pid=$!
pane_wait '─ Requests ─ queued 0  running 1  done 2 ─'
for _ in $(seq 100); do
  now=$(pane_text | sed -n 's/.*─ Drafts ─ \([0-9]*\) verify calls ─.*/\1/p')
  [ -n "$now" ] && [ "$now" -gt "$calls" ] && break
  sleep 0.1
done
[ "$now" -gt "$calls" ]
pane_keys q
for _ in $(seq 100); do [ -s status ] && break; sleep 0.1; done
grep -qx 'status=130' status
wait $curl_pid || true
