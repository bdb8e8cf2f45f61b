# Parts that are not whole pages cannot be mapped end to end: SHA256SUMS still
# verifies them, and the report says the container check was not done.
cp "$DATA/tiny.aff" .
aff-split -q --max-size 10000 tiny.aff >/dev/null
aff-verify -q --json --parts tiny.aff.part-00001-of-00003 | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["ok"], [f["status"] for f in j["files"]], j["container"], "digests" in j, j["container_note"])'
