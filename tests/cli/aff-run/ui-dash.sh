# The live view in a real terminal (tmux, 80x24): every panel is drawn with sane figures
# from a CPU run of the tiny fixture, the expert plane is coloured by tier (host memory:
# yellow), a resize to 120x40 redraws at the new size, and q closes the view with the
# terminal restored (cooked mode, echo, no alternate screen), the held text printed and
# status 130 (as Ctrl-C).
. "$SRC/tests/cli/tmux.bash"
pane_start 80 24 "LANG=C.UTF-8 aff-run -m '$DATA/models/tiny-a' --tokens 0,5,9,33 -n 4000 --ignore-eos --temp 0 -t 1 --ui dash;" \
  "echo status=\$? >'$PWD/status'; stty -a >'$PWD/stty.after'"
pane_wait 'decode +[1-9][0-9]*\.[0-9] tok/s'  # a frame with tokens decoded in its last second
pane_text > shot-80x24.txt
pane_styled > shot-80x24.ansi
[ "$(wc -l < shot-80x24.txt)" -le 24 ]
[ "$(pane_width)" -le 80 ]
head -1 shot-80x24.txt | grep -q '^ aff-run | tiny-a | cpu: the reference forward'
head -1 shot-80x24.txt | grep -q 'q quit$'
for panel in '─ Throughput ─' '─ Drafts ─ not built yet ─' '─ Tiers ─ not built yet ─' \
  '─ Expert plane ─ 6 layers x 8 experts ─' 'heat: placeholder' '─ Output ─' '─ Log ─' 'aff-run: cpu: the reference forward'; do
  grep -qF -- "$panel" shot-80x24.txt || { echo "missing: $panel"; cat shot-80x24.txt; exit 1; }
done
! grep -q 'GPUs' shot-80x24.txt  # no GPU library here: no panel
# Sane figures: positive prefill and decode rates, the 4 prompt tokens, some generated.
prefill=$(sed -n 's/.*prefill *\([0-9.]*\) tok\/s.*/\1/p' shot-80x24.txt)
decode=$(sed -n 's/.* decode *\([0-9.]*\) tok\/s.*/\1/p' shot-80x24.txt)
awk -v p="$prefill" -v d="$decode" 'BEGIN { exit !(p > 0 && d > 0 && d < 1e6) }'
grep -Eq 'tokens in 4 cached 0 out [1-9][0-9]*' shot-80x24.txt
# The plane: 6 rows L0..L5 of cells, drawn in yellow (host memory) with the heat glyph.
for l in 0 1 2 3 4 5; do grep -Eq "L$l +▒{8,}" shot-80x24.txt; done
grep 'L0 ' shot-80x24.ansi | grep -Eq $'\e\\[33m(\e\\[[0-9;]*m)*▒▒▒'
# The generated ids go to the Output panel while stdout is this terminal.
grep -A1 -- '─ Output ─' shot-80x24.txt | tail -1 | grep -Eq '^ [0-9 ]+$'

pane_resize 120 40
pane_wait '^ aff-run .{100,}q quit$'
pane_text > shot-120x40.txt
[ "$(wc -l < shot-120x40.txt)" -gt 24 ]
[ "$(pane_width)" -le 120 ]
[ "$(pane_width)" -gt 80 ]
[ "$(grep -n -- '─ Log ─' shot-120x40.txt | cut -d: -f1)" -gt 24 ]
grep -qF '─ Expert plane ─ 6 layers x 8 experts ─' shot-120x40.txt

pane_keys q
for _ in $(seq 100); do [ -s status ] && break; sleep 0.1; done
grep -qx 'status=130' status
grep -Eq '(^| )icanon( |$)' stty.after
grep -Eq '(^| )echo( |$)' stty.after
[ "$(tmx display -p -t view '#{alternate_on}')" = 0 ]
pane_history | grep -q '^0 5 9 33 [0-9 ]*'  # the held text, printed once the view closed
