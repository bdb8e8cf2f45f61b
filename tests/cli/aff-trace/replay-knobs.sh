# aff-trace replay takes the heat knobs under aff-run's names (--placement-decay, ...) and its
# older ones (--half-life, ...): both spellings give the same replay; a bad value is one line
# naming the option, status 2.
aff-trace synth --family v4flash --sequences 1 --decode-tokens 32 --out t.aft -q
aff-trace replay t.aft --gpu-mib 8192 --policy heat --half-life 2 --max-moves 1 --hysteresis 0 --min-gain 0 --json >old.json
aff-trace replay t.aft --gpu-mib 8192 --policy heat --placement-decay 2 --placement-moves 1 --placement-hysteresis 0 \
  --placement-min-gain 0 --json >new.json
cmp old.json new.json && echo same
aff-trace replay t.aft --gpu-mib 8192 --policy heat --json >default.json
cmp -s old.json default.json || echo "the knobs change the replay"
aff-trace replay t.aft --gpu-mib 1 --placement-decay 0 2>err || echo "status $?"
head -1 err
aff-trace replay t.aft --gpu-mib 1 --shadow-slots 0 2>err || echo "status $?"
head -1 err
