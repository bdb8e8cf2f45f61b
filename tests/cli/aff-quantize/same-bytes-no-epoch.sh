# With nothing set the container is still a pure function of the inputs: two runs a second
# apart write the same bytes, and record no creation time; SOURCE_DATE_EPOCH, when set, is
# recorded.
unset SOURCE_DATE_EPOCH
aff-quantize --src "$DATA/models/tiny-a-fp8" --out first.aff --threads 2 -q
sleep 1.1
aff-quantize --src "$DATA/models/tiny-a-fp8" --out second.aff --threads 2 -q
cmp first.aff second.aff
aff-info --json first.aff | python3 -c 'import json,sys; p=json.load(sys.stdin)["provenance"]; print(repr(p["created"]))'
SOURCE_DATE_EPOCH=1764374400 aff-quantize --src "$DATA/models/tiny-a-fp8" --out dated.aff --threads 2 -q
aff-info --json dated.aff | python3 -c 'import json,sys; p=json.load(sys.stdin)["provenance"]; print(p["created"])'
if cmp -s first.aff dated.aff; then echo "the date made no difference"; exit 1; fi
