# Mistakes give one line naming what is wrong: an unknown policy and a capacity that is no
# number of MiB (usage, 2), a damaged trace (1) and a trace that is not one.
aff-trace synth --family tiny --out t.aft -q
aff-trace replay t.aft --gpu-mib 1 --policy fifo || echo "exit $?"
aff-trace replay t.aft --gpu-mib 1,inf || echo "exit $?"
head -c 100 t.aft > cut.aft
aff-trace summary cut.aft || echo "exit $?"
echo "not a trace at all, just some text....................................................." > text.aft
aff-trace summary text.aft || echo "exit $?"
