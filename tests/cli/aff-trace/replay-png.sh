# The PNG curve beside the SVG (built with libpng; skipped, saying so, where the build has
# none): a 720 x 440 RGB image whose pixels, decoded here from the PNG's own rows, draw
# every policy's colour, and Belady's curve (#111111) above heat's (#d62728) in every
# column of the plot where both are drawn.
aff-trace synth --family v4flash --sequences 1 --decode-tokens 32 --out t.aft -q
aff-trace replay t.aft --gpu-mib 8192,16384,32768,65536 --host-mib 16384 --svg curve.svg >/dev/null 2>err
if grep -q "no PNG beside the SVG" err; then
  echo "aff-trace was built without libpng" >&2
  exit 77
fi
ls curve.*
python3 - <<'PY'
import struct, zlib
data = open("curve.png", "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR": ihdr = struct.unpack(">IIBBBBB", body)
    if kind == b"IDAT": idat += body
    pos += 12 + n
w, h, depth, colour = ihdr[:4]
print("size", w, h, "depth", depth, "colour type", colour)
raw = zlib.decompress(idat)
stride = 1 + 3 * w
assert len(raw) == h * stride and all(raw[y * stride] == 0 for y in range(h)), "rows are not unfiltered RGB"
def px(x, y):
    i = y * stride + 1 + 3 * x
    return raw[i] << 16 | raw[i + 1] << 8 | raw[i + 2]
colours = {"heat": 0xd62728, "demand": 0x1f77b4, "static": 0x2ca02c, "lru": 0xff7f0e, "lfu": 0x9467bd, "belady": 0x111111}
counts = {name: sum(px(x, y) == c for y in range(h) for x in range(w)) for name, c in colours.items()}
print("every policy drawn:", all(n > 100 for n in counts.values()))
plot = range(71, 570)  # inside the frame, left of the legend
def top(c, x):
    ys = [y for y in range(41, 380) if px(x, y) == c]
    return min(ys) if ys else None
cols = [(top(0x111111, x), top(0xd62728, x)) for x in plot]
both = [(b, t) for b, t in cols if b is not None and t is not None]
print("columns with both curves:", len(both) > 300, "belady above heat in all:", all(b <= t for b, t in both))
PY
