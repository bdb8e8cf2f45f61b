#!/usr/bin/env python3
"""Generates the tokenizer test corpus: documents of many scripts and shapes (prose, code,
CJK, Cyrillic, Arabic, Hindi, emoji with ZWJ sequences, combining marks, long numbers,
whitespace runs, special-token strings inside text, ill-formed UTF-8). All text is
written here or assembled at random from the word lists below with a fixed seed, so the
output is reproducible byte for byte.

Output format (corpus.bin): repeated records of u32 little-endian length + raw bytes.
usage: make_tokenizer_corpus.py OUT [--probe]   (--probe: only the Unicode-version probes)
"""
import random
import struct
import sys

R = random.Random(20261129)

EN = ("the of and to in is was for on that with as by at from this be are it an or which "
      "model token weight expert layer memory quantise budget placement engine cache kernel "
      "river mountain window garden morning evening library question answer simple careful "
      "running jumped quickly slowly bright darker heavier lighter can't won't I'm you're "
      "it's they'll we've O'Neil co-operate e-mail state-of-the-art U.S.A. Dr. Mrs. etc.").split()
ZH = ["模型", "专家", "量化", "内存", "显卡", "我们", "今天", "天气", "很好", "计算", "结果", "数据", "训练",
      "推理", "中文", "测试", "一个", "没有", "因为", "所以", "但是", "北京", "上海", "学习", "问题", "龍", "龥", "䶮"]
JA = ["これは", "テスト", "です", "日本語", "の", "文章", "カタカナ", "ひらがな", "東京", "ありがとう", "ございます",
      "コンピューター", "ｶﾀｶﾅ", "ー", "ヽ", "ゞ", "〜", "、", "。", "「", "」"]
KO = ["안녕하세요", "한국어", "문장", "입니다", "테스트", "모델", "그리고", "하지만", "서울", "감사합니다", "ㄱㄴㄷ", "각"]
RU = ["Привет", "мир", "модель", "память", "эксперт", "слой", "быстро", "медленно", "Ёлка", "ещё", "Україна", "їжак",
      "Ґанок", "Беларусь", "ў", "Съешь", "же", "этих", "мягких", "булок"]
AR = ["مرحبا", "بالعالم", "النموذج", "الذاكرة", "خبير", "طبقة", "سريع", "العربية", "كتاب", "مُحَمَّد", "ٱلْحَمْدُ", "لله"]
HI = ["नमस्ते", "दुनिया", "मॉडल", "स्मृति", "विशेषज्ञ", "परत", "हिन्दी", "भाषा", "क्षत्रिय", "श्री", "ज़िंदगी"]
OTHER = ["Ελληνικά", "καλημέρα", "שלום", "עולם", "สวัสดี", "ภาษาไทย", "Tiếng", "Việt", "người", "ქართული", "Հայերեն",
         "ᏣᎳᎩ", "ꦧꦱꦗꦮ", "ᠮᠣᠩᠭᠣᠯ", "བོད་ཡིག", "ພາສາລາວ", "සිංහල", "தமிழ்", "తెలుగు", "বাংলা", "ગુજરાતી", "ਪੰਜਾਬੀ"]
EMOJI = ["😀", "🙂", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "❤️", "✔️", "1️⃣", "#️⃣", "🧑🏿‍🚀",
         "🐱‍👤", "👁️‍🗨️", "🤷‍♀️", "🫠", "☕", "⚡", "🔥", "💯", "🧪", "🦀", "🐍", "©", "®", "™"]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334",
             "\u0301", "\u0300\u0301\u0302", "ก\u0e34\u0e4a", "क\u094d\u200dष", "i\u0307", "\u20dd", "x\u0338"]
DIGITS = ["0", "7", "42", "1234", "3.14159", "2026", "1,000,000", "99.9%", "١٢٣٤٥", "१२३४", "１２３", "²³", "½",
          "Ⅻ", "①②③", "0x7f3000", "1e-7", "-273.15", "٣٫١٤", "𝟙𝟚𝟛", "〇", "六"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", " \t ", "\u00a0", "\u3000",
          "\u2028", "\u2029", "\u0085", "\u200b", "\ufeff", "\u2003", "\u202f", "\u205f", "\u1680", "\u000b", "\u000c",
          "\u180e", "\u200d"]
PUNCT = [".", ",", "!", "?", ";", ":", "...", "—", "–", "-", "(", ")", "[", "]", "{", "}", "\"", "'", "«", "»", "“",
         "”", "‘", "’", "。", "，", "！", "？", "、", "؟", "،", "॥", "।", "…", "@", "#", "$", "%", "^", "&", "*", "_",
         "+", "=", "|", "\\", "/", "<", ">", "~", "`", "€", "£", "¥", "₹", "°", "±", "×", "÷", "→", "⇒", "∑", "∞"]
SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>", "<｜Assistant｜>",
           "<|EOT|>", "<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>", "<｜place▁holder▁no▁5｜>", "<｜place▁holder▁no▁799｜>",
           "<｜fim▁hole｜>", "<think>", "</think>", "<｜DSML｜tool_calls>", "</｜DSML｜invoke>", "<|DSML|invoke>",
           "<｜latest_reminder｜>", "<tool_result>", "<｜User", "<｜User｜", "<<｜User｜>>", "<｜end▁of▁sentence｜><｜User｜>",
           "｜", "▁", "<｜place▁holder▁no▁800｜>", "<｜Assistant｜><｜Assistant｜>"]
IDENT = ["x", "i", "n", "count", "buffer_size", "ExpertSlab", "read_all", "__init__", "self", "kMaxTokens", "résumé",
         "变量", "camelCaseName", "snake_case_name", "SCREAMING_CASE", "_private", "a1b2", "π"]


def pick(xs):
    return R.choice(xs)


def english_sentence():
    words = [pick(EN) for _ in range(R.randint(3, 18))]
    s = " ".join(words)
    s = s[0].upper() + s[1:]
    if R.random() < 0.3:
        s += " " + pick(DIGITS)
    return s + pick([".", ".", ".", "!", "?", "...", ";"])


def prose(lang, n):
    out = []
    for _ in range(n):
        if lang == "en":
            out.append(english_sentence())
        else:
            words = {"zh": ZH, "ja": JA, "ko": KO, "ru": RU, "ar": AR, "hi": HI, "other": OTHER}[lang]
            sep = "" if lang in ("zh", "ja") else " "
            s = sep.join(pick(words) for _ in range(R.randint(3, 14)))
            if R.random() < 0.3:
                s += sep + pick(DIGITS)
            if R.random() < 0.2:
                s += " " + pick(EN)
            end = {"zh": "。", "ja": "。", "ar": "؟", "hi": "।"}.get(lang, ".")
            out.append(s + pick([end, end, "!", "?", "…", ""]))
    return pick([" ", " ", "\n", "\n\n", "  "]).join(out)


def code_python():
    lines = []
    indent = 0
    for _ in range(R.randint(5, 40)):
        ind = "    " * indent if R.random() < 0.9 else "\t" * indent
        kind = R.random()
        a, b = pick(IDENT), pick(IDENT)
        if kind < 0.2:
            lines.append(f"{ind}def {a}({b}, *args, **kwargs) -> int:")
            indent = min(indent + 1, 4)
        elif kind < 0.35:
            lines.append(f"{ind}for {a} in range({pick(DIGITS[:6])}):")
            indent = min(indent + 1, 4)
        elif kind < 0.5:
            lines.append(f"{ind}{a} = {b}[{R.randint(0, 999)}] + {R.random():.6f}  # {english_sentence()}")
        elif kind < 0.6:
            lines.append(f'{ind}print(f"{{{a}!r}} -> {b}: {pick(ZH)} {pick(EMOJI)}")')
        elif kind < 0.7:
            lines.append(f"{ind}return {a} if {b} is not None else {R.randint(-99999, 99999)}")
            indent = max(indent - 1, 0)
        elif kind < 0.8:
            lines.append("")
        else:
            lines.append(f'{ind}"""{english_sentence()}"""')
    return pick(["\n", "\r\n"]).join(lines) + "\n"


def code_cpp():
    out = []
    for _ in range(R.randint(3, 20)):
        a, b = pick(IDENT), pick(IDENT)
        out.append(pick([
            f"static_assert(sizeof({a}) == {R.randint(1, 64)}, \"{english_sentence()}\");",
            f"for (std::size_t {a} = 0; {a} < {b}.size(); ++{a}) {{\n\t{b}[{a}] += 0x{R.randint(0, 2**32):08x}u;\n}}",
            f"template <class T> auto {a}(const T& {b}) -> decltype({b}.begin()) {{ return {b}.begin(); }}",
            f"// {english_sentence()}",
            f"/* {prose('zh', 1)} */",
            f"if ({a} != nullptr && *{a} >= {R.randint(0, 10**9)}) {{ throw std::runtime_error(\"{a}: bad\"); }}",
            f"#include <{pick(['vector', 'string', 'cstdint', 'aff/core/error.hpp'])}>",
            f"std::cout << \"{a}\" << std::setw({R.randint(1, 20)}) << {b} << '\\n';",
        ]))
    return "\n".join(out) + "\n"


def code_json():
    import json
    obj = {pick(IDENT): pick([R.randint(-10**12, 10**12), R.random(), pick(ZH), None, True, [1, 2, 3],
                              {"nested": pick(EMOJI), "k": english_sentence()}]) for _ in range(R.randint(2, 12))}
    return json.dumps(obj, ensure_ascii=R.random() < 0.3, indent=pick([None, 2, 4, "\t"]))


def shell():
    return "\n".join(pick([
        f"$ ls -la /tmp/{pick(IDENT)} | grep -E '^[a-z]+$' | wc -l",
        f"cmake --build build -j{R.randint(1, 64)} && ctest --output-on-failure",
        f"export PATH=\"$HOME/.local/bin:$PATH\"  # {english_sentence()}",
        f"curl -s 'http://localhost:{R.randint(1000, 65535)}/v1/chat/completions' -d '{{\"model\":\"x\"}}'",
        f"sed -n '{R.randint(1, 99)},{R.randint(100, 999)}p' file.txt",
    ]) for _ in range(R.randint(2, 10)))


def numbers():
    parts = []
    for _ in range(R.randint(3, 20)):
        n = R.randint(1, 60)
        parts.append(pick([
            "".join(R.choice("0123456789") for _ in range(n)),
            f"{R.randint(0, 10**9):,}",
            f"{R.uniform(-1e6, 1e6):.{R.randint(0, 12)}f}",
            f"{R.random():e}",
            "".join(pick(DIGITS) for _ in range(R.randint(1, 8))),
            f"v{R.randint(0, 20)}.{R.randint(0, 99)}.{R.randint(0, 999)}",
            f"{R.randint(1, 28):02d}/{R.randint(1, 12):02d}/{R.randint(1900, 2100)}",
            f"+1 ({R.randint(100, 999)}) {R.randint(100, 999)}-{R.randint(1000, 9999)}",
        ]))
    return pick([" ", ", ", "\n", "\t", ""]).join(parts)


def whitespace_mix():
    out = []
    for _ in range(R.randint(5, 40)):
        out.append(pick(SPACES) * R.randint(1, 6))
        out.append(pick([pick(EN), pick(PUNCT), pick(ZH), pick(DIGITS), pick(EMOJI), ""]))
    return "".join(out)


def emoji_text():
    out = []
    for _ in range(R.randint(5, 30)):
        out.append(pick(EMOJI) * R.randint(1, 3))
        out.append(pick([" ", "", "\n", " " + pick(EN) + " ", pick(PUNCT), "\ufe0f", "\u200d"]))
    return "".join(out)


def combining():
    return "".join(pick(COMBINING) + pick(["", " ", pick(EN), pick(PUNCT), "\u0301" * R.randint(1, 30)])
                   for _ in range(R.randint(5, 30)))


def specials():
    out = []
    for _ in range(R.randint(3, 20)):
        out.append(pick(SPECIAL))
        out.append(pick(["", " ", "\n", pick(EN), english_sentence(), pick(ZH), pick(PUNCT), "<", "｜", "\u2581"]))
    return "".join(out)


def punctuation():
    return "".join(pick(PUNCT) * R.randint(1, 4) + pick(["", " ", pick(EN), "\n", pick(PUNCT) + pick(EN)])
                   for _ in range(R.randint(5, 40)))


def mixed():
    gens = [lambda: prose(pick(["en", "zh", "ja", "ko", "ru", "ar", "hi", "other"]), R.randint(1, 4)), code_python,
            code_cpp, code_json, shell, numbers, whitespace_mix, emoji_text, combining, specials, punctuation]
    return pick(["", " ", "\n", "\n\n", "\t"]).join(pick(gens)() for _ in range(R.randint(2, 6)))


def ill_formed():
    """Raw bytes that are not valid UTF-8 around valid text."""
    bad = [b"\xff", b"\xfe", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf",
           b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\x80", b"\xbf\xbf", b"\xe4\xb8", b"\xf0\x9f\x98",
           b"\xe2\x82", b"\xc3", b"\xf0\x9f", b"\xe6\x97\xa5\xe6", b"\xf8\x88\x80\x80\x80"]
    out = b""
    for _ in range(R.randint(3, 15)):
        out += pick(bad) + pick([b"", b" ", b"abc", "日本".encode(), b"\n", "😀".encode(), b"123"])
    return out


def probe():
    """Characters assigned after Unicode 14 (PCRE2 10.42's tables); compared separately."""
    return [" 🫨 shaking face", "ok 🩷 pink heart", "Kawi 𑼄𑼅 text", "CJK ext H 𱍐𱍑", "x\U0001E4D0y"]


def main():
    out_path = sys.argv[1]
    docs = []
    if "--probe" in sys.argv:
        docs = [d.encode() for d in probe()]
    else:
        makers = [lambda: prose("en", R.randint(1, 30))] * 4 + [
            lambda: prose("zh", R.randint(1, 20)), lambda: prose("ja", R.randint(1, 20)),
            lambda: prose("ko", R.randint(1, 20)), lambda: prose("ru", R.randint(1, 20)),
            lambda: prose("ar", R.randint(1, 20)), lambda: prose("hi", R.randint(1, 20)),
            lambda: prose("other", R.randint(1, 20)), code_python, code_python, code_cpp, code_cpp, code_json, shell,
            numbers, whitespace_mix, whitespace_mix, emoji_text, combining, specials, specials, punctuation, mixed,
            mixed, mixed]
        size = 0
        while size < 560_000:
            d = pick(makers)().encode()
            docs.append(d)
            size += len(d)
        for _ in range(60):
            docs.append(ill_formed())
        # Long words: exercise the queue-based merge and the regex on long runs.
        docs.append(("".join(R.choice("abcdefghij") for _ in range(5000))).encode())
        docs.append((" " * 3000 + "x" + "\t" * 500 + "\n" * 300).encode())
        docs.append(("9" * 4000).encode())
        docs.append(("数据" * 1500).encode())
        docs.append(("ab" * 2000 + "!" * 1000).encode())
        docs.append(("e\u0301" * 1000).encode())
        docs.append(b"")
        docs.append(b" ")
        docs.append(b"\n")
    with open(out_path, "wb") as f:
        for d in docs:
            f.write(struct.pack("<I", len(d)))
            f.write(d)
    print(f"{len(docs)} documents, {sum(len(d) for d in docs)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
