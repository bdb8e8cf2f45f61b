# The worked hex dump in formats/container.md must show the bytes tests/data/tiny.aff
# really has: every "    OFFSET: hex ..." line of the spec is compared with the file.
if ! command -v python3 >/dev/null; then
  echo "skipped: python3 is not installed"
  exit 0
fi
python3 - "$SRC/formats/container.md" "$DATA/tiny.aff" <<'PY'
import re, sys
spec, data = open(sys.argv[1]).read(), open(sys.argv[2], "rb").read()
lines = re.findall(r"^    ([0-9a-f]{8}): ((?:[0-9a-f]{2,4} ?)+)", spec, re.M)
bad = 0
for off, hexpart in lines:
    want = bytes.fromhex(hexpart.replace(" ", ""))
    o = int(off, 16)
    if data[o:o + len(want)] != want:
        print("differs at", off); bad += 1
print(f"{len(lines)} hex dump lines checked, {bad} differ")
sys.exit(1 if bad or len(lines) < 20 else 0)
PY
