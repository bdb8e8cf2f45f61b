# --gpus and --gpu-mib, as aff-run takes them: --gpus 0 serves from the CPU reference and the
# ready line says so; --gpus 1 on a machine or build without a GPU stops the server with one
# line naming why (a CPU-only build: exit 2, no GPU support; a GPU build with no visible
# device: exit 1, how many are visible).
. "$SRC/tests/cli/aff-serve/server.bash"
byte_tokenizer tok.json
start_server -m "$DATA/models/tiny-a" --tokenizer tok.json --threads 1 --gpus 0 --gpu-mib 100
wait_ready
grep -q '^aff-serve: ready: tiny-a loaded in [0-9.]* s (context [0-9]* tokens; cpu: the reference forward; prefix cache 4.00 GiB; drafts off (the model has no MTP layer))$' server.log
curl -s "$BASE/v1/completions" -o comp.json -d '{"max_tokens": 2, "temperature": 0, "prompt": "abc"}'
[ "$(json_get comp.json 'j.usage.prompt_tokens')" = 4 ]
set +e
aff-serve --port 0 -m "$DATA/models/tiny-a" --tokenizer tok.json --gpus 1 2>err
status=$?
set -e
if [ $status = 2 ]; then
  grep -qx 'aff-serve: --gpus 1: this build of aff has no GPU support (configured with AFF_GPU=OFF); use --gpus 0' err
elif [ $status = 1 ]; then
  grep -qx 'aff-serve: 1 GPU(s) asked for, 0 visible (CUDA_VISIBLE_DEVICES=.*)' err
else
  false  # a machine with a GPU: the server would have kept serving
fi
