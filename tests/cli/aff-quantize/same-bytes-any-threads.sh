# The container is a pure function of the inputs: the same bytes at 1 and 3 threads.
export SOURCE_DATE_EPOCH=1764374400
aff-quantize --src "$DATA/models/tiny-a-fp8" --out one.aff --threads 1 -q
aff-quantize --src "$DATA/models/tiny-a-fp8" --out three.aff --threads 3 -q
cmp one.aff three.aff
aff-info --json one.aff | python3 -c 'import json,sys; p=json.load(sys.stdin)["provenance"]; print(p["created"])'
