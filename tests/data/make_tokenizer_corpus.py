#!/usr/bin/python3
"""Writes tests/data/tokenizer_corpus.txt: 2,400 varied lines for tokenizer parity.

Deterministic (seeded). Each line is one tokenizer input; no line holds a newline.
"""
import random
import sys

rng = random.Random(20261130)
english = ["The quick brown fox jumps over the lazy dog.", "It's what they'd've wanted, isn't it?",
           "I'M SURE YOU'LL LIKE IT; WE'VE TRIED.", "Don't panic: the answer is 42.", "She said \"hello\" -- twice!",
           "Machine learning models compress knowledge.", "e.g. (i.e.) etc... and so on", "Mr. O'Neil's dog's bone",
           "Quantisation trades precision for speed", "newline-free text with trailing spaces   "]
numbers = ["1234567890", "3.14159265", "1,000,000", "2026-11-30", "0x7fffffff", "-42", "+1 (555) 010-9999",
           "1e-6", "99.9%", "v1.2.3-rc4", "١٢٣٤", "१२३४", "²³¹", "Ⅻ", "½ ¼ ¾"]
cjk = ["你好，世界！", "我们今天去公园散步吧。", "機械学習モデルを量子化する", "ひらがなとカタカナ", "한국어 문장입니다.",
       "東京タワーは高い", "中文、日本語、한국어混在", "　全角スペース　と　記号！？", "繁體中文測試字串"]
arabic = ["مرحبا بالعالم", "اللغة العربية جميلة", "السلام عليكم ورحمة الله", "٣ كتب على الطاولة"]
hindi = ["नमस्ते दुनिया", "हिन्दी भाषा सुंदर है", "क्षत्रिय ज्ञान", "मैं ठीक हूँ।"]
other = ["Привет, мир!", "Γειά σου Κόσμε", "สวัสดีครับ", "Ça va? Très bien, merci.", "Straße Größe Übermaß",
         "naïve café résumé", "e\u0301le\u0300ve", "\u1100\u1161\u11a8", "Å vs A\u030a", "ﬁ ligature ﬂ",
         "Zürich—Genève", "ǅ ǈ ǋ titlecase", "İstanbul ıı", "ſtraße long s"]
emoji = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇯🇵", "❤️", "🏳️‍🌈", "🤖 robots", "✅ done", "🔥🔥🔥", "☕️ break"]
code = ["def f(x):", "    return x ** 2  # square", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "#include <vector>", "std::vector<int> v{1, 2, 3};", "if __name__ == \"__main__\":", "\tindented_with_tab()",
        "const x = () => { return {a: 1}; };", "SELECT * FROM users WHERE id = 7;", "<div class=\"x\">hi</div>",
        "{\"key\": [1, 2.5, null, true]}", "a_b-c.d/e\\f", "x+=1;y-=2;z*=3", "https://example.org/path?q=1&r=2#frag",
        "user.name+tag@example.com", "$HOME/bin:$PATH", "s/foo/bar/g", "λx.x", "fn main() { println!(\"hi\"); }"]
special = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<|im_start|>user", "<|im_sta",
           "<|vision_start|>", "<tool_call>", "<|fim_prefix|>"]
spaces = [" ", "  ", "   ", "\t", " \t ", "\u00a0", "\u3000", "\u2003", "\u2009", "    ", "\u000b", "\u0085", "\u200b"]
groups = [english, numbers, cjk, arabic, hindi, other, emoji, code, special]

lines = []
# Each fragment alone, then with leading/trailing whitespace.
for g in groups:
    for s in g:
        lines.append(s)
        lines.append(" " + s)
        lines.append(s + "  ")
for s in spaces:
    lines.append("a" + s + "b")
    lines.append(s * 3 + "x")
    lines.append("x" + s * 2)
# Random mixtures.
while len(lines) < 2400:
    n = rng.randint(1, 6)
    parts = []
    for _ in range(n):
        g = rng.choice(groups)
        parts.append(rng.choice(g))
        if rng.random() < 0.6:
            parts.append(rng.choice(spaces) if rng.random() < 0.3 else " ")
    line = "".join(parts)
    if rng.random() < 0.1:
        line = line.upper()
    lines.append(line)
for line in lines:
    assert "\n" not in line and "\r" not in line
out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/tokenizer_corpus.txt"
with open(out, "w", encoding="utf-8", newline="\n") as f:
    f.write("\n".join(lines) + "\n")
