#!/usr/bin/env python3
"""An independent reader of .aff containers, written from formats/container.md alone
(the spec's "educational decoder"): if it and libaff/container agree on every file in
tests/data, the spec is enough to write a reader. Standard library only; XXH3-64 is
implemented here from the published algorithm so the digests are checked too.

usage: read_aff.py [--json] FILE...
Prints one line per file: "<file>: ok: ..." or "<file>: rejected: <reason>".
With --json, prints for each valid file its tensor list as JSON (one object per line).
Exit status 0 when every file is valid, 1 otherwise.
"""
import json
import struct
import sys

M64 = (1 << 64) - 1

# --- XXH3-64 (seed 0, default secret) -----------------------------------------------
SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
P32_1, P32_2, P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
P64_1, P64_2, P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P64_4, P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
PMX1, PMX2 = 0x165667919E3779F9, 0x9FB21C651E98DF25


def r64(b, o):
    return int.from_bytes(b[o:o + 8], "little")


def r32(b, o):
    return int.from_bytes(b[o:o + 4], "little")


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def fold(a, b):
    p = a * b
    return (p ^ (p >> 64)) & M64


def xxh64_avalanche(h):
    h ^= h >> 33
    h = h * P64_2 & M64
    h ^= h >> 29
    h = h * P64_3 & M64
    return h ^ (h >> 32)


def avalanche(h):
    h ^= h >> 37
    h = h * PMX1 & M64
    return h ^ (h >> 32)


def mix16(b, o, so):
    return fold(r64(b, o) ^ r64(SECRET, so), r64(b, o + 8) ^ r64(SECRET, so + 8))


def xxh3_64(b):
    n = len(b)
    if n == 0:
        return xxh64_avalanche(r64(SECRET, 56) ^ r64(SECRET, 64))
    if n <= 3:
        combined = (b[0] << 16) | (b[n >> 1] << 24) | b[n - 1] | (n << 8)
        return xxh64_avalanche(combined ^ (r32(SECRET, 0) ^ r32(SECRET, 4)))
    if n <= 8:
        x = (r32(b, n - 4) + (r32(b, 0) << 32)) ^ (r64(SECRET, 8) ^ r64(SECRET, 16))
        x ^= rotl(x, 49) ^ rotl(x, 24)
        x = x * PMX2 & M64
        x ^= (x >> 35) + n
        x = x * PMX2 & M64
        return x ^ (x >> 28)
    if n <= 16:
        lo = r64(b, 0) ^ (r64(SECRET, 24) ^ r64(SECRET, 32))
        hi = r64(b, n - 8) ^ (r64(SECRET, 40) ^ r64(SECRET, 48))
        swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
        return avalanche((n + swapped + hi + fold(lo, hi)) & M64)
    if n <= 128:
        acc = n * P64_1 & M64
        pairs = [(0, 0)]
        if n > 32:
            pairs.append((16, 32))
            if n > 64:
                pairs.append((32, 64))
                if n > 96:
                    pairs.append((48, 96))
        for off, so in reversed(pairs):
            acc += mix16(b, off, so) + mix16(b, n - off - 16, so + 16)
        return avalanche(acc & M64)
    if n <= 240:
        acc = n * P64_1 & M64
        for i in range(8):
            acc += mix16(b, 16 * i, 16 * i)
        acc = avalanche(acc & M64)
        for i in range(8, n // 16):
            acc += mix16(b, 16 * i, 16 * (i - 8) + 3)
        acc += mix16(b, n - 16, 136 - 17)
        return avalanche(acc & M64)
    return xxh3_long(b)


def xxh3_long(b):
    n = len(b)
    acc = [P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1]
    keys = [[r64(SECRET, 8 * s + 8 * i) for i in range(8)] for s in range(17)]

    def stripe(o, k):
        for i in range(8):
            v = r64(b, o + 8 * i)
            x = v ^ k[i]
            acc[i ^ 1] = (acc[i ^ 1] + v) & M64
            acc[i] = (acc[i] + (x & 0xFFFFFFFF) * (x >> 32)) & M64

    block = 64 * 16
    blocks = (n - 1) // block
    scramble = [r64(SECRET, 128 + 8 * i) for i in range(8)]
    for blk in range(blocks):
        for s in range(16):
            stripe(blk * block + 64 * s, keys[s])
        for i in range(8):
            a = acc[i]
            a ^= a >> 47
            a ^= scramble[i]
            acc[i] = a * P32_1 & M64
    stripes = ((n - 1) - block * blocks) // 64
    for s in range(stripes):
        stripe(blocks * block + 64 * s, keys[s])
    stripe(n - 64, [r64(SECRET, 192 - 64 - 7 + 8 * i) for i in range(8)])
    result = n * P64_1 & M64
    for i in range(4):
        result += fold(acc[2 * i] ^ r64(SECRET, 11 + 16 * i), acc[2 * i + 1] ^ r64(SECRET, 11 + 16 * i + 8))
    return avalanche(result & M64)


# --- the container ----------------------------------------------------------------
MAGIC = bytes([0x89, 0x41, 0x46, 0x46, 0x0D, 0x0A, 0x1A, 0x0A])
# id: (name, block elements, block bytes)  -- spec §6.1
TYPES = {1: ("F32", 1, 4), 2: ("F16", 1, 2), 3: ("BF16", 1, 2), 4: ("F64", 1, 8), 5: ("I8", 1, 1),
         6: ("I16", 1, 2), 7: ("I32", 1, 4), 8: ("I64", 1, 8), 9: ("U8", 1, 1), 10: ("F8_E4M3", 1, 1),
         11: ("F8_E8M0", 1, 1), 12: ("FP4_E2M1", 2, 1), 256: ("TQ2875", 256, 92), 257: ("TQ2875R", 256, 92)}
KNOWN = {b"DATA", b"META", b"TDIR", b"TOKJ", b"CHAT", b"PROF", b"CBOK"}


class Reject(Exception):
    pass


def expert_key(name):
    """(draft, layer, expert) for a routed-expert tensor name, else None (spec §7.3)."""
    parts = name.split(".")
    if len(parts) < 6 or parts[0] not in ("layers", "mtp") or parts[2:4] != ["ffn", "experts"]:
        return None
    for d in (parts[1], parts[4]):
        if not d.isdigit() or (len(d) > 1 and d[0] == "0") or not d.isascii():
            return None
    return (parts[0] == "mtp", int(parts[1]), int(parts[4]))


def prefix(key):
    return f"{'mtp' if key[0] else 'layers'}.{key[1]}.ffn.experts.{key[2]}"


def read(path):
    f = open(path, "rb").read()
    size = len(f)
    if size < 64:
        raise Reject("file is too short")
    if f[:8] != MAGIC:
        raise Reject("wrong magic")
    version, header_size, file_size, table_offset, count, res1, table_digest, res2, header_digest = \
        struct.unpack_from("<IIQQIIQQQ", f, 8)
    if version > 1:
        raise Reject(f"format version {version} is newer than 1")
    if version == 0:
        raise Reject("format version 0")
    if xxh3_64(f[:56]) != header_digest:
        raise Reject("header digest mismatch")
    if header_size != 64 or res1 or res2:
        raise Reject("header_size or reserved field")
    if file_size != size:
        raise Reject(f"file_size {file_size} but the file has {size} bytes")
    if table_offset < 64 or table_offset + 32 * count > size:
        raise Reject("section table outside the file")
    table = f[table_offset:table_offset + 32 * count]
    if xxh3_64(table) != table_digest:
        raise Reject("section table digest mismatch")
    sections = {}
    regions = [(0, 64, "header"), (table_offset, table_offset + 32 * count, "table")]
    for i in range(count):
        sid, flags, off, sz, dig = struct.unpack_from("<4sIQQQ", table, 32 * i)
        name = sid.decode("latin-1")
        if flags & ~1:
            raise Reject(f"section {name}: reserved flags")
        if off + sz > size:
            raise Reject(f"section {name} runs past end of file")
        if sid in sections:
            raise Reject(f"section {name} twice")
        if sid not in KNOWN and flags & 1:
            raise Reject(f"unknown required section {name}")
        if sz:
            regions.append((off, off + sz, name))
        sections[sid] = (off, sz, dig)
    regions.sort()
    for a, b in zip(regions, regions[1:]):
        if b[0] < a[1]:
            raise Reject(f"{a[2]} overlaps {b[2]}")
    for need in (b"DATA", b"META", b"TDIR"):
        if need not in sections:
            raise Reject(f"missing section {need.decode()}")
    for sid, (off, sz, dig) in sections.items():
        if sid == b"DATA":
            if off % 4096 or dig:
                raise Reject("DATA misaligned or digest not zero")
        elif xxh3_64(f[off:off + sz]) != dig:
            raise Reject(f"section {sid.decode()} digest mismatch")

    moff, msz, _ = sections[b"META"]
    try:
        meta = json.loads(f[moff:moff + msz].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Reject("metadata: invalid JSON")
    if not isinstance(meta, dict):
        raise Reject("metadata is not an object")
    for k in ("config", "provenance"):
        if k in meta and not isinstance(meta[k], dict):
            raise Reject(f"metadata: {k} is not an object")
    if "quantiser" in meta and not (meta["quantiser"] is None or isinstance(meta["quantiser"], dict)):
        raise Reject("metadata: quantiser")
    if "role" in meta and meta["role"] not in ("main", "draft"):
        raise Reject("metadata: role")
    cb = sections.get(b"CBOK")
    cb_id = f"{xxh3_64(f[cb[0]:cb[0] + cb[1]]):016x}" if cb else None
    if "codebook_id" in meta:
        v = meta["codebook_id"]
        if not isinstance(v, str) or len(v) != 16 or any(c not in "0123456789abcdef" for c in v):
            raise Reject("metadata: codebook_id")
        if cb_id and cb_id != v:
            raise Reject("metadata: codebook_id does not match CBOK")
        cb_id = cb_id or v

    doff, dsz, _ = sections[b"DATA"]
    toff, tsz, _ = sections[b"TDIR"]
    d = f[toff:toff + tsz]
    if tsz < 16:
        raise Reject("directory too small")
    T, E, N = struct.unpack_from("<IIQ", d, 0)
    if 16 + 32 * E + 72 * T + N != tsz:
        raise Reject("directory counts do not fill the section")
    names = d[16 + 32 * E + 72 * T:]
    extents = []
    spans = []
    keys = set()
    for i in range(E):
        off, sz, layer, expert, flags, res = struct.unpack_from("<QQIIII", d, 16 + 32 * i)
        key = (bool(flags & 1), layer, expert)
        if flags & ~1 or res:
            raise Reject(f"extent {prefix(key)}: reserved")
        if off % 4096:
            raise Reject(f"extent {prefix(key)}: offset {off:#x} not aligned to 4096")
        if sz == 0 or off < doff or off + sz > doff + dsz:
            raise Reject(f"extent {prefix(key)}: size 0 or outside DATA")
        if key in keys:
            raise Reject(f"extent {prefix(key)} twice")
        keys.add(key)
        extents.append({"key": key, "offset": off, "size": sz, "tensors": []})
        spans.append((off, off + sz, "extent " + prefix(key)))
    tensors = []
    seen = set()
    for i in range(T):
        off, length, dig, d0, d1, d2, d3, noff, nsz, typ, ext, rank = struct.unpack_from("<QQQ4QIHHIB", d, 16 + 32 * E + 72 * i)
        res = d[16 + 32 * E + 72 * i + 69:16 + 32 * E + 72 * i + 72]
        if nsz == 0 or noff + nsz > N:
            raise Reject(f"tensor #{i}: name outside the name table")
        name = names[noff:noff + nsz]
        if any(c < 0x21 or c > 0x7E for c in name):
            raise Reject(f"tensor #{i}: name not printable ASCII")
        name = name.decode("ascii")
        if name in seen:
            raise Reject(f"tensor {name} twice")
        seen.add(name)
        if any(res):
            raise Reject(f"tensor {name}: reserved")
        if typ not in TYPES:
            raise Reject(f"tensor {name}: unknown type {typ}")
        if rank > 4:
            raise Reject(f"tensor {name}: rank {rank}")
        dims = [d0, d1, d2, d3]
        if any(dims[rank:]):
            raise Reject(f"tensor {name}: dimension beyond rank")
        shape = dims[:rank]
        tname, be, bb = TYPES[typ]
        rows = 1
        for x in shape[:-1]:
            rows *= x
        last = shape[-1] if shape else 1
        if length != rows * -(-last // be) * bb:
            raise Reject(f"tensor {name}: length {length} does not match {tname} {shape}")
        if off % 64:
            raise Reject(f"tensor {name}: offset not aligned to 64")
        key = expert_key(name)
        if ext == 0xFFFFFFFF:
            if key:
                raise Reject(f"tensor {name}: expert tensor outside an extent")
            if off < doff or off + length > doff + dsz:
                raise Reject(f"tensor {name}: outside DATA")
            absolute = off
            if length:
                spans.append((off, off + length, "tensor " + name))
        else:
            if ext >= E:
                raise Reject(f"tensor {name}: extent index out of range")
            x = extents[ext]
            if key != x["key"]:
                raise Reject(f"tensor {name}: not a tensor of extent {prefix(x['key'])}")
            if off + length > x["size"]:
                raise Reject(f"tensor {name}: runs past the end of its extent")
            absolute = x["offset"] + off
            x["tensors"].append((absolute, absolute + length, "tensor " + name))
        tensors.append({"name": name, "type": tname, "shape": shape, "offset": absolute, "length": length,
                        "xxh3": f"{dig:016x}", "extent": prefix(x["key"]) if ext != 0xFFFFFFFF else None})

    def no_overlap(v):
        v = sorted(s for s in v if s[1] > s[0])
        for a, b in zip(v, v[1:]):
            if b[0] < a[1]:
                raise Reject(f"{a[2]} overlaps {b[2]}")
    no_overlap(spans)
    for x in extents:
        if not x["tensors"]:
            raise Reject(f"extent {prefix(x['key'])} holds no tensors")
        no_overlap(x["tensors"])

    cfg = meta.get("config")
    if cfg is not None:
        def num(k):
            v = cfg.get(k)
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise Reject(f"config.{k} is not a non-negative integer")
            return v
        L, X, D = num("num_hidden_layers"), num("n_routed_experts"), num("num_nextn_predict_layers")
        cr = cfg.get("compress_ratios")
        if L is not None and isinstance(cr, list) and len(cr) > L:
            D = max(D or 0, len(cr) - L)
        for x in extents:
            draft, layer, expert = x["key"]
            if not draft and L is not None and layer >= L:
                raise Reject(f"extent {prefix(x['key'])}: layer out of range")
            if draft and D is not None and layer >= D:
                raise Reject(f"extent {prefix(x['key'])}: draft stage out of range")
            if X is not None and expert >= X:
                raise Reject(f"extent {prefix(x['key'])}: expert {expert} out of range")
        for t in tensors:
            p = t["name"].split(".")
            if len(p) > 2 and p[0] in ("layers", "mtp") and p[1].isdigit():
                limit = L if p[0] == "layers" else D
                if limit is not None and int(p[1]) >= limit:
                    raise Reject(f"tensor {t['name']}: layer out of range")

    # Digests on request: here always, since this reader exists to check.
    for t in tensors:
        if f"{xxh3_64(f[t['offset']:t['offset'] + t['length']]):016x}" != t["xxh3"]:
            raise Reject(f"tensor {t['name']}: digest mismatch")
    return {"tensors": tensors, "extents": len(extents), "sections": [s.decode() for s in sections],
            "codebook_id": cb_id}


def main(argv):
    as_json = "--json" in argv
    files = [a for a in argv if a != "--json"]
    status = 0
    for path in files:
        try:
            c = read(path)
        except Reject as e:
            print(f"{path}: rejected: {e}")
            status = 1
            continue
        if as_json:
            for t in c["tensors"]:
                print(json.dumps(t, sort_keys=True))
        else:
            print(f"{path}: ok: {len(c['tensors'])} tensors, {c['extents']} extents, sections "
                  f"{' '.join(c['sections'])}, codebook {c['codebook_id']}, digests ok")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
