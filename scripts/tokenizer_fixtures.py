#!/usr/bin/env python3
"""Expected outputs for test/tokenizer*.test.ts, computed without the Hugging Face libraries.

Reads the tiny tokenizer directories under test/fixtures/tokenizer/ (written by
scripts/tokenizer_fixture_dirs.mjs) and writes test/fixtures/tokenizer/expected.json:

* token ids and decoded text of sample texts, from a byte-level BPE encoder written here from the
  published algorithm (added-token split, NFC, the Qwen2 pre-tokenizer rule hand-coded over Unicode
  categories, the byte-to-character table, the lowest-rank merge loop) and a word-level encoder;
* chat-template renders from Python jinja2 with the settings transformers uses
  (ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, a `tojson` filter that keeps
  non-ASCII, `raise_exception`), for the tiny template and the real Qwen3 template, and the BPE ids
  of each render.

Run: node scripts/tokenizer_fixture_dirs.mjs && /usr/bin/python3 scripts/tokenizer_fixtures.py
"""
import json
import os
import re
import unicodedata

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIX = os.path.join(ROOT, "test", "fixtures", "tokenizer")


# ---------------------------------------------------------------- byte-level alphabet
def byte_table():
    """byte -> symbol: printable Latin-1 bytes stay, the others move to U+0100.. in byte order."""
    keep = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, shift = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shift)
            shift += 1
    return table


BYTE_TO_SYM = byte_table()
SYM_TO_BYTE = {s: b for b, s in BYTE_TO_SYM.items()}

# ---------------------------------------------------------------- Qwen2 pre-tokenizer, by hand
# Unicode White_Space (what \s means in the Rust regex engine and in the JS port).
WHITE_SPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(c) for c in range(0x2000, 0x200B)
}


def is_letter(c):
    return unicodedata.category(c).startswith("L")


def is_number(c):
    return unicodedata.category(c).startswith("N")


def is_space(c):
    return c in WHITE_SPACE


def is_other(c):  # [^\s\p{L}\p{N}]
    return not (is_space(c) or is_letter(c) or is_number(c))


CONTRACTIONS = ["s", "t", "re", "ve", "m", "ll", "d"]


def qwen2_split(text):
    """The Qwen2 rule, alternative by alternative, first match at each position (as a regex engine)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        end = None
        # 1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if c == "'":
            for suf in CONTRACTIONS:
                if text[i + 1 : i + 1 + len(suf)].lower() == suf:
                    end = i + 1 + len(suf)
                    break
        # 2. [^\r\n\p{L}\p{N}]?\p{L}+
        if end is None:
            j = i
            if not (c in "\r\n" or is_letter(c) or is_number(c)) and i + 1 < n and is_letter(text[i + 1]):
                j = i + 1
            if is_letter(text[j]):
                while j < n and is_letter(text[j]):
                    j += 1
                end = j
        # 3. \p{N}
        if end is None and is_number(c):
            end = i + 1
        # 4. ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        if end is None:
            j = i + 1 if (c == " " and i + 1 < n and is_other(text[i + 1])) else i
            if is_other(text[j]):
                while j < n and is_other(text[j]):
                    j += 1
                while j < n and text[j] in "\r\n":
                    j += 1
                end = j
        if end is None and is_space(c):
            k = i
            while k < n and is_space(text[k]):
                k += 1
            run = text[i:k]
            # 5. \s*[\r\n]+ : up to the last line break of the whitespace run
            last_nl = max(run.rfind("\r"), run.rfind("\n"))
            if last_nl >= 0:
                end = i + last_nl + 1
            # 6. \s+(?!\S) : the run, less its last character when text follows
            elif k == n:
                end = k
            elif k - 1 > i:
                end = k - 1
            # 7. \s+
            else:
                end = k
        assert end is not None and end > i, (text, i)
        out.append(text[i:end])
        i = end
    return out


# ---------------------------------------------------------------- BPE
class ByteLevelBPE:
    def __init__(self, tokenizer_json):
        model = tokenizer_json["model"]
        self.vocab = dict(model["vocab"])
        self.ranks = {}
        for r, m in enumerate(model["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks[(a, b)] = r
        self.added = {t["content"]: t["id"] for t in tokenizer_json["added_tokens"]}
        self.id_to_tok = {i: t for t, i in self.vocab.items()}
        self.id_to_tok.update({i: t for t, i in self.added.items()})

    def split_added(self, text):
        """Longest added token at the leftmost position; the rest are plain segments."""
        names = sorted(self.added, key=len, reverse=True)
        parts, buf, i = [], "", 0
        while i < len(text):
            hit = next((t for t in names if text.startswith(t, i)), None)
            if hit:
                if buf:
                    parts.append((buf, False))
                    buf = ""
                parts.append((hit, True))
                i += len(hit)
            else:
                buf += text[i]
                i += 1
        if buf:
            parts.append((buf, False))
        return parts

    def bpe(self, word):
        syms = list(word)
        while len(syms) > 1:
            best = min(
                ((self.ranks.get((syms[k], syms[k + 1])), k) for k in range(len(syms) - 1)),
                key=lambda x: (x[0] is None, x[0] if x[0] is not None else 0),
            )
            if best[0] is None:
                break
            a, b = syms[best[1]], syms[best[1] + 1]
            merged, k = [], 0
            while k < len(syms):
                if k + 1 < len(syms) and syms[k] == a and syms[k + 1] == b:
                    merged.append(a + b)
                    k += 2
                else:
                    merged.append(syms[k])
                    k += 1
            syms = merged
        return syms

    def encode(self, text):
        ids = []
        for seg, is_added in self.split_added(text):
            if is_added:
                ids.append(self.added[seg])
                continue
            for piece in qwen2_split(unicodedata.normalize("NFC", seg)):
                word = "".join(BYTE_TO_SYM[b] for b in piece.encode("utf-8"))
                ids.extend(self.vocab[s] for s in self.bpe(word))
        return ids

    def decode(self, ids, skip=()):
        data = b""
        for i in ids:
            if i in skip:
                continue
            tok = self.id_to_tok[i]
            if all(ch in SYM_TO_BYTE for ch in tok):
                data += bytes(SYM_TO_BYTE[ch] for ch in tok)
            else:
                data += tok.encode("utf-8")
        return data.decode("utf-8", errors="replace")


class WordLevel:
    def __init__(self, tokenizer_json):
        self.vocab = dict(tokenizer_json["model"]["vocab"])
        self.unk = self.vocab[tokenizer_json["model"]["unk_token"]]
        self.added = {t["content"]: t["id"] for t in tokenizer_json["added_tokens"]}
        self.id_to_tok = {i: t for t, i in self.vocab.items()}
        self.id_to_tok.update({i: t for t, i in self.added.items()})

    def encode(self, text):
        ids = []
        for seg, is_added in ByteLevelBPE.split_added(self, text):
            if is_added:
                ids.append(self.added[seg])
                continue
            # Whitespace pre-tokenizer: \w+|[^\w\s]+ (ASCII word characters: the word kind is ASCII-only)
            for w in re.findall(r"\w+|[^\w\s]+", seg, flags=re.ASCII):
                ids.append(self.vocab.get(w, self.unk))
        return ids

    def decode(self, ids, skip=()):
        # No decoder: tokens joined by single spaces.
        return " ".join(self.id_to_tok[i] for i in ids if i not in skip)


# ---------------------------------------------------------------- jinja2 as transformers sets it up
def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render(template, chat, specials):
    kwargs = dict(specials)
    kwargs["messages"] = chat["messages"]
    kwargs["add_generation_prompt"] = chat["add_generation_prompt"]
    if "enable_thinking" in chat:
        kwargs["enable_thinking"] = chat["enable_thinking"]
    if "tools" in chat:
        kwargs["tools"] = chat["tools"]
    return make_env().from_string(template).render(**kwargs)


TEXTS = [
    "Hello world! The two agents share the work.",
    "It's fine, they're here; WE'LL see. I'd say you've done it, don't you?",
    "Numbers: 3.14159, 2025-06-01, 1,000,000 and x=42+7.",
    "  leading spaces,\tone tab\t\ttwo tabs,   three spaces   \n\n\nthree newlines\r\nCRLF end  ",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe, e\u0301 composed by NFC",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \ud55c\uad6d\uc5b4",
    "emoji \U0001F642\U0001F44D\U0001F3FD and \U0001F468\u200D\U0001F469\u200D\U0001F467 family",
    "inline <|im_start|>user\nhi<|im_end|>\n<think>\nhmm\n</think>\n\nok<|endoftext|>",
    "def add(a, b):\n    return a + b\n",
    "",
]

WORD_TEXTS = [
    "the cat sat on the mat.",
    "hello, world? 42 dogs",
    "<|im_start|>user\nthe dog<|im_end|>\n",
    "a cat's mat 1 2",
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city, in \u00b0C",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}

TINY_CHATS = [
    {
        "name": "system + user + generation prompt",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Summarise: two agents share the work."},
        ],
        "add_generation_prompt": True,
    },
    {
        "name": "two turns, thinking off",
        "messages": [
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
            {"role": "user", "content": "And 3 + 3?"},
        ],
        "add_generation_prompt": True,
        "enable_thinking": False,
    },
    {
        "name": "thinking on",
        "messages": [{"role": "user", "content": "Caf\u00e9 \u4f60\u597d \U0001F642"}],
        "add_generation_prompt": True,
        "enable_thinking": True,
    },
    {
        "name": "final assistant turn with reasoning, no generation prompt",
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!", "reasoning_content": "\nGreet back.\n"},
        ],
        "add_generation_prompt": False,
    },
    {
        "name": "tool results",
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Checking."},
            {"role": "tool", "content": "{\"temp\": 21}"},
            {"role": "tool", "content": "{\"temp\": 19}"},
        ],
        "add_generation_prompt": True,
        "enable_thinking": False,
    },
]

QWEN3_CHATS = [
    {
        "name": "system + think history + generation prompt",
        "messages": [
            {"role": "system", "content": "You are Qwen."},
            {"role": "user", "content": "Name a prime."},
            {"role": "assistant", "content": "<think>\nsmall primes: 2, 3\n</think>\n\n2"},
            {"role": "user", "content": "Another?"},
        ],
        "add_generation_prompt": True,
    },
    {
        "name": "plain two turns, thinking off",
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi there"},
            {"role": "user", "content": "Bye"},
        ],
        "add_generation_prompt": True,
        "enable_thinking": False,
    },
    {
        "name": "reasoning_content on the last assistant turn",
        "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "basic sum"},
        ],
        "add_generation_prompt": False,
    },
    {
        "name": "tools + tool call + tool response, thinking off",
        "messages": [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": "Weather in Z\u00fcrich?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Z\u00fcrich", "days": 2}}}
                ],
            },
            {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"\u2600\"}"},
        ],
        "tools": [WEATHER_TOOL],
        "add_generation_prompt": True,
        "enable_thinking": False,
    },
    {
        "name": "user message that is a tool response, thinking on",
        "messages": [
            {"role": "user", "content": "Start"},
            {"role": "assistant", "content": "<think>\nplan\n</think>\n\nstep 1"},
            {"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
            {"role": "assistant", "content": "<think>\nnext\n</think>\n\nstep 2"},
        ],
        "add_generation_prompt": True,
        "enable_thinking": True,
    },
]


def load_dir(name):
    with open(os.path.join(FIX, name, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    with open(os.path.join(FIX, name, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    return tj, tc


def specials_of(tc):
    out = {}
    for k in ("bos_token", "eos_token", "pad_token", "unk_token"):
        if tc.get(k):
            out[k] = tc[k]
    out["additional_special_tokens"] = tc.get("additional_special_tokens", [])
    return out


def main():
    bpe_json, bpe_cfg = load_dir("tiny-bpe")
    word_json, word_cfg = load_dir("tiny-word")
    bpe, word = ByteLevelBPE(bpe_json), WordLevel(word_json)
    bpe_special = {t["id"] for t in bpe_json["added_tokens"] if t["special"]}
    word_special = {t["id"] for t in word_json["added_tokens"] if t["special"]}
    with open(os.path.join(FIX, "qwen3_chat_template.jinja"), encoding="utf-8") as f:
        qwen3_template = f.read()

    def text_case(tok, special, text):
        ids = tok.encode(text)
        return {
            "text": text,
            "ids": ids,
            "decoded": tok.decode(ids),
            "decodedSkipSpecial": tok.decode(ids, skip=special),
        }

    bpe_cases = [text_case(bpe, bpe_special, t) for t in TEXTS]
    # Decoding part of a multi-byte character gives U+FFFD, as UTF-8 lossy decoding does.
    emoji_ids = bpe.encode("\U0001F642")
    partial = {"ids": emoji_ids[:-1], "decoded": bpe.decode(emoji_ids[:-1])}

    def chat_case(chat, template, specials):
        rendered = render(template, chat, specials)
        return {**chat, "rendered": rendered, "ids": bpe.encode(rendered)}

    out = {
        "_about": "Generated by scripts/tokenizer_fixtures.py (independent Python BPE + jinja2); do not edit.",
        "jinja2Version": jinja2.__version__,
        "bpe": bpe_cases,
        "bpePartialUtf8": partial,
        "word": [text_case(word, word_special, t) for t in WORD_TEXTS],
        "tinyChats": [chat_case(c, bpe_cfg["chat_template"], specials_of(bpe_cfg)) for c in TINY_CHATS],
        "wordChats": [
            {**c, "rendered": render(word_cfg["chat_template"], c, specials_of(word_cfg)),
             "ids": word.encode(render(word_cfg["chat_template"], c, specials_of(word_cfg)))}
            for c in TINY_CHATS[:2]
        ],
        "qwen3Chats": [chat_case(c, qwen3_template, specials_of(bpe_cfg)) for c in QWEN3_CHATS],
    }
    with open(os.path.join(FIX, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", os.path.join(FIX, "expected.json"))


if __name__ == "__main__":
    main()
