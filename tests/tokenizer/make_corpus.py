#!/usr/bin/env python3
"""make_corpus.py - writes corpus.txt, the tokenizer test corpus (about 64 KB), deterministically.

Every sentence below was written for qcore's tests (no text is taken from elsewhere), so the
corpus is distributed under the repository's own terms.  The second half mixes these pieces
with generated code, numbers, whitespace runs and emoji from a fixed seed, to reach the
corner cases of the pre-tokenizer regexes (contractions, digit runs, \\r\\n, lone spaces at
the end, combining marks, supplementary-plane characters, special-token look-alikes).
Run it again only to change the corpus: `python3 make_corpus.py > corpus.txt`.
"""
import random
import sys

PROSE = {
    "en": [
        "The tokenizer reads the text once, splits it into words, and then merges bytes by rank.",
        "We measured 3.5 tokens per word on this paragraph, which is higher than we'd hoped.",
        "It's not the model's fault; they'll say it's the data's, and I'd agree if you'd asked.",
        "SHE'LL COME BACK, HE'D SAID, BUT WE'VE WAITED SINCE 1987 AND IT'S 2024 NOW.",
        "A kernel that moves fewer bytes wins when the batch is small: memory, not math, is the wall.",
        "Quantization trades a little accuracy for a lot of bandwidth; the question is how little.",
        "Don't   put   three spaces between words   unless you want to test whitespace runs.",
        "The quick brown fox jumps over the lazy dog near the riverbank at 6:45 a.m. on 2023-11-05.",
        "Numbers like 1,234,567.89 and 0x1F3A and 1e-9 and -42 and 3/4 appear in technical prose.",
        "He wrote 'hello' in single quotes, \"world\" in double quotes, and `code` in backticks.",
        "Email me at someone@example.org or visit https://example.com/path?query=1&x=2#frag.",
        "Lists: first; second; third... and finally --- a dash, an ellipsis \u2026 and an em dash \u2014 done.",
    ],
    "de": [
        "Die Gr\u00f6\u00dfe des Wortschatzes bestimmt, wie viele Zeichen ein Token im Mittel tr\u00e4gt.",
        "\u00dcber den Fluss f\u00fchrt eine schmale Br\u00fccke, die im Winter oft vereist ist.",
        "Stra\u00dfenbahnhaltestellenschilderaufh\u00e4ngevorrichtung ist ein sehr langes Wort.",
        "M\u00fcller, Schr\u00f6der und Wei\u00df trafen sich um 14:30 Uhr am Bahnhof.",
    ],
    "fr": [
        "L'\u00e9t\u00e9 dernier, nous avons go\u00fbt\u00e9 \u00e0 la cr\u00e8me br\u00fbl\u00e9e pr\u00e8s de l'\u00e9glise.",
        "Qu'est-ce qu'il y a ? \u00ab Rien \u00bb, r\u00e9pondit-elle, \u00ab absolument rien. \u00bb",
        "Le c\u0153ur a ses raisons ; l'ordinateur, lui, n'a que des octets.",
    ],
    "es": [
        "\u00bfD\u00f3nde est\u00e1 la biblioteca? \u00a1All\u00ed, junto al ca\u00f1\u00f3n del r\u00edo!",
        "El ni\u00f1o comi\u00f3 pi\u00f1a y ara\u00f1\u00f3 la pared con una u\u00f1a.",
    ],
    "ru": [
        "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u042d\u0442\u043e \u0442\u0435\u0441\u0442\u043e\u0432\u044b\u0439 \u0442\u0435\u043a\u0441\u0442 \u0434\u043b\u044f \u0442\u043e\u043a\u0435\u043d\u0438\u0437\u0430\u0442\u043e\u0440\u0430.",
        "\u0412 2024 \u0433\u043e\u0434\u0443 \u043c\u044b \u0438\u0437\u043c\u0435\u0440\u0438\u043b\u0438 \u0441\u043a\u043e\u0440\u043e\u0441\u0442\u044c: 123 \u0442\u043e\u043a\u0435\u043d\u0430 \u0432 \u0441\u0435\u043a\u0443\u043d\u0434\u0443.",
        "\u0421\u044a\u0435\u0448\u044c \u0436\u0435 \u0435\u0449\u0451 \u044d\u0442\u0438\u0445 \u043c\u044f\u0433\u043a\u0438\u0445 \u0444\u0440\u0430\u043d\u0446\u0443\u0437\u0441\u043a\u0438\u0445 \u0431\u0443\u043b\u043e\u043a \u0434\u0430 \u0432\u044b\u043f\u0435\u0439 \u0447\u0430\u044e.",
    ],
    "el": [
        "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5, \u03ba\u03cc\u03c3\u03bc\u03b5! \u0397 \u03b8\u03ac\u03bb\u03b1\u03c3\u03c3\u03b1 \u03b5\u03af\u03bd\u03b1\u03b9 \u03ae\u03c1\u03b5\u03bc\u03b7 \u03c3\u03ae\u03bc\u03b5\u03c1\u03b1.",
        "\u0391\u03c0\u03cc \u03c4\u03bf \u0391 \u03c9\u03c2 \u03c4\u03bf \u03a9, \u03bf\u03b9 \u03bb\u03ad\u03be\u03b5\u03b9\u03c2 \u03ad\u03c7\u03bf\u03c5\u03bd \u03c4\u03cc\u03bd\u03bf\u03c5\u03c2.",
    ],
    "zh": [
        "\u5206\u8bcd\u5668\u628a\u6587\u672c\u5207\u6210\u5c0f\u5757\uff0c\u7136\u540e\u6309\u7167\u5408\u5e76\u89c4\u5219\u7ec4\u5408\u5b57\u8282\u3002",
        "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\uff01\u6e29\u5ea6\u662f25\u5ea6\u3002",
        "\u91cf\u5316\u6a21\u578b\u7528\u66f4\u5c11\u7684\u5b57\u8282\u5b58\u50a8\u6743\u91cd\uff0c\u901f\u5ea6\u66f4\u5feb\u3002",
    ],
    "ja": [
        "\u3053\u3093\u306b\u3061\u306f\u3001\u4e16\u754c\uff01\u30c8\u30fc\u30af\u30ca\u30a4\u30b6\u30fc\u306e\u30c6\u30b9\u30c8\u3067\u3059\u3002",
        "\u6771\u4eac\u99c5\u304b\u3089\u65b0\u5e79\u7dda\u3067\u4eac\u90fd\u307e\u3067\u7d042\u6642\u9593\u534a\u304b\u304b\u308a\u307e\u3059\u3002",
        "\uff8a\uff9d\uff76\uff78\uff76\uff80\uff76\uff85\u3068\u5168\u89d2\uff21\uff22\uff23\uff11\uff12\uff13\u3082\u6df7\u305c\u307e\u3059\u3002",
    ],
    "ko": [
        "\uc548\ub155\ud558\uc138\uc694, \uc138\uacc4! \ud1a0\ud06c\ub098\uc774\uc800\ub294 \ubc14\uc774\ud2b8\ub97c \ubcd1\ud569\ud569\ub2c8\ub2e4.",
        "\uc591\uc790\ud654\ub294 \uba54\ubaa8\ub9ac \ub300\uc5ed\ud3ed\uc744 \uc904\uc774\ub294 \ubc29\ubc95\uc785\ub2c8\ub2e4. 4\ube44\ud2b8\uba74 \ucda9\ubd84\ud569\ub2c8\ub2e4.",
    ],
    "ar": [
        "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645! \u0647\u0630\u0627 \u0646\u0635 \u0644\u0627\u062e\u062a\u0628\u0627\u0631 \u0627\u0644\u0645\u062c\u0632\u0626.",
        "\u0627\u0644\u0623\u0631\u0642\u0627\u0645 \u0627\u0644\u0639\u0631\u0628\u064a\u0629: \u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669 \u0648\u0627\u0644\u063a\u0631\u0628\u064a\u0629: 0123456789.",
    ],
    "he": ["\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd! \u05d6\u05d4\u05d5 \u05d8\u05e7\u05e1\u05d8 \u05d1\u05d3\u05d9\u05e7\u05d4 \u05e7\u05e6\u05e8."],
    "hi": [
        "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e! \u092f\u0939 \u090f\u0915 \u092a\u0930\u0940\u0915\u094d\u0937\u0923 \u0935\u093e\u0915\u094d\u092f \u0939\u0948\u0964",
        "\u0926\u0947\u0935\u0928\u093e\u0917\u0930\u0940 \u0905\u0902\u0915: \u0966\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e\u096f\u0964",
    ],
    "th": ["\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01 \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\u0e44\u0e21\u0e48\u0e21\u0e35\u0e0a\u0e48\u0e2d\u0e07\u0e27\u0e48\u0e32\u0e07\u0e23\u0e30\u0e2b\u0e27\u0e48\u0e32\u0e07\u0e04\u0e33"],
    "tr": ["\u0130stanbul'da \u0131l\u0131k bir g\u00fcnd\u00fc; \u00e7ocuklar \u015fark\u0131 s\u00f6yl\u00fcyordu."],
    "vi": ["Ti\u1ebfng Vi\u1ec7t c\u00f3 r\u1ea5t nhi\u1ec1u d\u1ea5u: \u1eaf \u1eb1 \u1eb3 \u1eb5 \u1eb7, \u0111\u01b0\u1eddng ph\u1ed1 \u0111\u00f4ng ng\u01b0\u1eddi."],
    "pl": ["Za\u017c\u00f3\u0142\u0107 g\u0119\u015bl\u0105 ja\u017a\u0144 \u2014 to zdanie ma wszystkie polskie litery."],
}

CODE = [
    "int main(int argc, char **argv) {\n    for (int i = 0; i < argc; i++) printf(\"%s\\n\", argv[i]);\n    return 0;\n}\n",
    "def merge(pairs, ranks):\n    while True:\n        best = min(pairs, key=lambda p: ranks.get(p, 1e9))\n        if best not in ranks:\n            break\n    return pairs\n",
    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}, \"version\": \"1.0\"}\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC LIMIT 10;\n",
    "<html><body><p class=\"x\">Hello &amp; goodbye</p><br/></body></html>\n",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); println!(\"{:?}\", v); }\n",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do wc -l \"$f\" | awk '{print $1}'; done\n",
    "x = [1, 2, 3]\t# tabs\tand\ttrailing spaces   \nif x:\n\tprint(x[-1])\n",
    "\\begin{equation} E = mc^2 \\quad \\sum_{i=1}^{n} i = \\frac{n(n+1)}{2} \\end{equation}\n",
    "const re = /^[a-z0-9_-]{3,16}$/i; // a regex in JavaScript\n",
]

EMOJI = ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F469\u200D\U0001F4BB", "\U0001F1EF\U0001F1F5",
         "\u2764\uFE0F", "\U0001F680", "\U0001F9EA", "\U0001F468\u200D\U0001F469\u200D\U0001F467", "\u2603",
         "\U0001F4AF", "\u00a9\u00ae\u2122", "\U0001D400\U0001D401\U0001D7CE"]

ODD = ["e\u0301", "n\u0303", "a\u030A\u0316", "\u200B", "\u00A0", "\u3000", "\u2028", "\u0085", "\uFEFF",
       "\u2009", "\u202F", "\u00AD", "\uFB01", "\u2160\u2161\u2162", "\u00BD\u00BE", "\u2070\u00B2\u00B3",
       "'s", "'S", "'ll", "'LL", "'Re", "'ve", "'M", "'D", "'t", "\u017F", "\u212A", "'\u017F",
       "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "im_end|>", "<|", "|>", "<<>>",
       "\r\n", "\r", "\n\n\n", "\t\t", "   ", " \n ", "\n ", " \t\n"]

WS = [" ", "  ", "   ", "\n", "\n\n", "\t", " \n", "\r\n", "    ", "\n    ", "\u00A0", "\u3000 "]


def number(rng):
    k = rng.randrange(8)
    if k == 0:
        return str(rng.randrange(10 ** rng.randrange(1, 15)))
    if k == 1:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randrange(0, 6)}f}"
    if k == 2:
        return f"{rng.randrange(1, 10**6):,}"
    if k == 3:
        return hex(rng.randrange(1 << 32))
    if k == 4:
        return f"{rng.random():.3e}"
    if k == 5:
        return "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 40)))
    if k == 6:
        return f"{rng.randrange(1, 13)}/{rng.randrange(1, 29)}/{rng.randrange(1990, 2031)}"
    return "\u0661\u0662\u0663" if rng.random() < .5 else "\u0967\u0968\u0969"


def main():
    rng = random.Random(20240611)
    out = ["qcore tokenizer test corpus. All text below was written for qcore's tests; see make_corpus.py.\n\n"]
    # first half: every piece once, in order
    for lang, lines in PROSE.items():
        out.append(f"[{lang}]\n")
        out.extend(line + "\n" for line in lines)
        out.append("\n")
    out.extend(CODE)
    out.append(" ".join(EMOJI) + "\n")
    out.append("|".join(ODD) + "\n")
    # second half: seeded mixtures
    words = [w for lines in PROSE.values() for line in lines for w in line.split(" ")]
    while sum(len(s.encode()) for s in out) < 64 * 1024:
        k = rng.randrange(10)
        if k < 4:
            n = rng.randrange(3, 30)
            out.append(" ".join(rng.choice(words) for _ in range(n)) + rng.choice(WS))
        elif k == 4:
            out.append(rng.choice(CODE))
        elif k == 5:
            out.append(" ".join(number(rng) for _ in range(rng.randrange(1, 8))) + rng.choice(WS))
        elif k == 6:
            out.append("".join(rng.choice(EMOJI + ODD) for _ in range(rng.randrange(1, 6))) + rng.choice(WS))
        elif k == 7:
            w = rng.choice(words)
            out.append(w * rng.randrange(2, 6) + rng.choice(WS))
        elif k == 8:
            out.append(rng.choice(WS) * rng.randrange(1, 5))
        else:
            out.append(rng.choice(words) + rng.choice(ODD) + rng.choice(words) + rng.choice(WS))
    out.append("end of corpus")
    sys.stdout.buffer.write("".join(out).encode("utf-8"))


if __name__ == "__main__":
    main()
