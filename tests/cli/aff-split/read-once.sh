# --json reports the bytes read at read(): equal to the size means the input was read once.
cp "$DATA/tiny.aff" .
mkdir out && aff-split -q --json --max-size 4KiB -o out tiny.aff | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["size"], j["bytes_read"], len(j["parts"]), j["parts"][-1]["size"], j["sums"])'
ls out | wc -l
