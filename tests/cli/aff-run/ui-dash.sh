# The live view in a real terminal (tmux, 80x24): every panel is drawn with sane figures
# from a CPU run of the trained tiny fixture (4 layers of 16 experts; slow enough, a few
# hundred tok/s on one thread, that 4000 tokens outlast the case), the expert plane is
# coloured by tier (host memory: yellow) with the router's heat, the Drafts panel shows the
# MTP drafts' acceptance (--draft auto probes drafts early), a resize to 120x40 redraws
# at the new size, and q closes the view with the terminal restored (cooked mode, echo, no
# alternate screen), the held text printed and status 130 (as Ctrl-C). The CPU forward keeps
# every expert in host memory: the Tiers panel says so (tiered figures need the GPU's expert
# tiers: tests/gpu/dash_tiers_device.sh; the panel's figures on a fake sequence:
# tests/unit/ui/tier_feed_test.cpp).
. "$SRC/tests/cli/tmux.bash"
pane_start 80 24 "LANG=C.UTF-8 aff-run -m '$DATA/models/tiny-trained' -p 'Once upon a time' -n 4000 --ignore-eos --temp 0 -t 1 --ui dash;" \
  "echo status=\$? >'$PWD/status'; stty -a >'$PWD/stty.after'"
pane_wait 'decode +[1-9][0-9]*\.[0-9] tok/s'  # a frame with tokens decoded in its last second
pane_wait 'accepted +[0-9]+\.[0-9] %'  # the drafts' figures (--draft auto probes drafts early)
pane_text > shot-80x24.txt
pane_styled > shot-80x24.ansi
[ "$(wc -l < shot-80x24.txt)" -le 24 ]
[ "$(pane_width)" -le 80 ]
head -1 shot-80x24.txt | grep -q '^ aff-run | tiny-trained | cpu: the reference forward'
head -1 shot-80x24.txt | grep -q 'q quit$'
for panel in '─ Throughput ─' '─ Tiers ─ all resident (CPU) ─' 'every routed expert in host memory' \
  'nothing moves: no PCIe or SSD traffic' \
  '─ Expert plane ─ 4 layers x 16 experts' 'heat: tokens routed, half-life 10 s' '─ Output ─' '─ Log ─' \
  'aff-run: drafts: mtp, up to 3 a step, while faster than without'; do
  grep -qF -- "$panel" shot-80x24.txt || { echo "missing: $panel"; cat shot-80x24.txt; exit 1; }
done
grep -Eq '─ Drafts ─ [1-9][0-9]* verify calls ─' shot-80x24.txt  # the MTP drafts' figures are there
! grep -q 'not built yet\|no figures yet' shot-80x24.txt
! grep -q 'tiers: ' shot-80x24.txt  # no tier source line: nothing is tiered
! grep -q 'GPUs' shot-80x24.txt  # no GPU library here: no panel
# Sane figures: positive prefill and decode rates, the 4 prompt tokens, some generated.
prefill=$(sed -n 's/.*prefill *\([0-9.]*\) tok\/s.*/\1/p' shot-80x24.txt)
decode=$(sed -n 's/.* decode *\([0-9.]*\) tok\/s.*/\1/p' shot-80x24.txt)
awk -v p="$prefill" -v d="$decode" 'BEGIN { exit !(p > 0 && d > 0 && d < 1e6) }'
grep -Eq 'tokens in [0-9]+ cached 0 out [1-9][0-9]*' shot-80x24.txt
# The plane: 4 rows L0..L3 of 16 cells (2 columns each), in yellow (host memory), heat as
# the glyph's density: the hottest expert full, and in every layer at least 3 levels (3 of
# 16 experts are routed per token, so routing is uneven).
for l in 0 1 2 3; do
  grep -Eq "L$l +[·░▒▓█]{32}$" shot-80x24.txt
  [ "$(grep "L$l " shot-80x24.txt | grep -o '[·░▒▓█]' | sort -u | wc -l)" -ge 3 ]
done
grep -E 'L[0-3] ' shot-80x24.txt | grep -q '█'
grep 'L0 ' shot-80x24.ansi | grep -Eq $'\e\\[(1;)?33m'
! grep 'L0 ' shot-80x24.ansi | grep -Eq $'\e\\[3[124]m'  # no GPU, SSD or other colour there
# The generated text goes to the Output panel while stdout is this terminal.
sed -n '/─ Output ─/,/─ Log ─/p' shot-80x24.txt | sed '1d;$d' | grep -q '[^ ]'

pane_resize 120 40
pane_wait '^ aff-run .{100,}q quit$'
pane_text > shot-120x40.txt
[ "$(wc -l < shot-120x40.txt)" -gt 24 ]
[ "$(pane_width)" -le 120 ]
[ "$(pane_width)" -gt 80 ]
[ "$(grep -n -- '─ Log ─' shot-120x40.txt | cut -d: -f1)" -gt 24 ]
grep -qF '─ Expert plane ─ 4 layers x 16 experts ─' shot-120x40.txt  # room for the whole rule now

pane_keys q
for _ in $(seq 100); do [ -s status ] && break; sleep 0.1; done
grep -qx 'status=130' status
grep -Eq '(^| )icanon( |$)' stty.after
grep -Eq '(^| )echo( |$)' stty.after
[ "$(tmx display -p -t view '#{alternate_on}')" = 0 ]
pane_history | grep -q '^Once upon a time'  # the held text, printed once the view closed
