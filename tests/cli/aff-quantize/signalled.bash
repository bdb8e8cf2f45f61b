# Sourced by interrupted.sh and terminated.sh (usage: . signalled.bash SIGNAL): quantises a
# checkpoint big enough to take a while, sends SIGNAL once the experts stage has started, and
# prints the exit status and every file left behind besides the inputs.
python3 "$SRC/tests/cli/aff-quantize/make_checkpoint.py" big "$DATA" big
aff-quantize --src big --out m.aff --threads 1 --progress always 2>err &
pid=$!
for _ in $(seq 1 600); do grep -q '^quantising experts: started' err && break; sleep 0.05; done
kill -"$1" "$pid"
status=0
wait "$pid" || status=$?
echo "status $status"
# run_case.sh's own stdout and stderr files are here too.
ls -A | grep -v -x -e big -e err -e stdout -e stderr || echo 'no other file'
