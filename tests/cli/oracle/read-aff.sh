# The independent reader tests/oracle/read_aff.py (written from formats/container.md
# alone) and libaff must agree on every .aff under tests/data: files under bad/ are
# refused by both, every other file is accepted by both with the same tensor list.
if ! command -v python3 >/dev/null; then
  echo "skipped: python3 is not installed, so the independent reader was not run"
  exit 0
fi
oracle="$SRC/tests/oracle/read_aff.py"
mapfile -t files < <(find "$DATA" -name '*.aff' | sort)
python3 "$oracle" "${files[@]}" >verdicts.txt || true
fail=0 good=() bad=0
for f in "${files[@]}"; do
  rel=${f#"$DATA"/}
  o=$(grep -F "$f: " verdicts.txt | sed -E 's/^.*: (ok|rejected): .*$/\1/')
  aff-verify -q "$f" >/dev/null 2>&1 && a=ok || a=rejected
  case $rel in bad/*) want=rejected ;; *) want=ok ;; esac
  if [ "$o" != "$want" ] || [ "$a" != "$want" ]; then
    echo "DISAGREE $rel: oracle $o, aff-verify $a, expected $want"; grep -F "$f: " verdicts.txt; fail=1
  fi
  if [ "$want" = ok ]; then good+=("$f"); else bad=$((bad + 1)); fi
done
# Same tensors, types, shapes, offsets, lengths and digests from both readers.
python3 "$oracle" --json "${good[@]}" >o.jsonl
for f in "${good[@]}"; do aff-info --json --tensors "$f"; done | python3 -c '
import json, sys
dec = json.JSONDecoder()
text, pos = sys.stdin.read(), 0
while pos < len(text.strip()):
    obj, end = dec.raw_decode(text, pos)
    pos = end + 1
    for t in obj["tensor_list"]:
        t.pop("class")
        print(json.dumps(t, sort_keys=True))' >a.jsonl
cmp -s o.jsonl a.jsonl || { echo "DISAGREE: tensor lists differ"; diff o.jsonl a.jsonl | head; fail=1; }
echo "agreed on ${#good[@]} valid containers ($(wc -l <a.jsonl) tensors) and $bad damaged ones"
[ "${#good[@]}" -ge 1 ] && [ "$bad" -ge 11 ] || { echo "expected tiny.aff and the 11 damaged fixtures at least"; fail=1; }
exit $fail
