# SIGTERM in the middle of quantising: death by SIGTERM (status 143) and no file left
# behind, neither the container nor its temporary.
python3 "$SRC/tests/cli/aff-quantize/make_checkpoint.py" big "$DATA" big
aff-quantize --src big --out m.aff --threads 1 --progress always 2>err &
pid=$!
for _ in $(seq 1 600); do grep -q '^quantising experts: started' err && break; sleep 0.05; done
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
echo "status $status"
# run_case.sh's own stdout and stderr files are here too.
ls -A | grep -v -x -e big -e err -e stdout -e stderr || echo 'no other file'
