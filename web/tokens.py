"""How token bytes are shown, and what the page reads from a tokenizer (public API only).

A token is a byte string. Shown as text, whitespace would be invisible and a token holding part
of a multi-byte UTF-8 character cannot be decoded at all. So every token is turned into a list
of pieces `(kind, text)`: kind "text" is literal text; "space", "newline", "tab", "cr" and
"control" are visible markers for whitespace; "byte" is one byte of an incomplete character,
written `<0xF0>`. Templates draw each kind in its own style, so a marker never looks like a
character the user typed.
"""
import json
import os

from pipeline.bpe import GPT2_PAT

MARKERS = {" ": ("space", "·"), "\n": ("newline", "↵"), "\t": ("tab", "→"), "\r": ("cr", "␍")}


def pieces(token: bytes) -> list:
    """[(kind, text), ...] for one token's bytes, adjacent literal text joined."""
    out = []
    for ch in token.decode("utf-8", errors="surrogateescape"):
        if "\udc80" <= ch <= "\udcff":                   # a byte that is not a whole character
            kind, text = "byte", f"<0x{ord(ch) - 0xdc00:02X}>"
        elif ch in MARKERS:
            kind, text = MARKERS[ch]
        elif ch.isspace() or not ch.isprintable():
            kind, text = "control", f"U+{ord(ch):04X}"
        else:
            kind, text = "text", ch
        if kind == "text" and out and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


def plain(token: bytes) -> str:
    """One-line text for a token, markers included (for Plotly labels and option lists)."""
    return "".join(text for _, text in pieces(token))


def mergeable_ranks(tokenizer) -> dict:
    """token bytes -> rank (= token id), from tiktoken's public API.

    tiktoken keeps its ranks in a private attribute; `token_byte_values()` lists every mergeable
    token and `encode_single_token` gives its rank, which works for any tiktoken Encoding.
    """
    return {b: tokenizer.encode_single_token(b) for b in tokenizer.token_byte_values()}


def pretokenizer_pattern(model_path: str) -> str:
    """The regex that splits text into words before BPE (tiktoken does not expose it).

    Read from the model's tiktoken_config.json; Hugging Face byte-level BPE models (vocab.json +
    merges.txt) use GPT-2's pattern. The page checks that replaying each word reproduces the
    tokenizer's own ids, so a wrong pattern would show, not hide.
    """
    config = os.path.join(model_path or "", "tiktoken_config.json")
    if os.path.exists(config):
        with open(config) as f:
            return json.load(f).get("pat_str", GPT2_PAT)
    return GPT2_PAT


def token_plain(tokenizer, token_id: int) -> str:
    """`plain` text of one token id; an id the model has but the tokenizer lacks (some
    checkpoints pad their vocabulary) is named as such rather than raising."""
    try:
        return plain(tokenizer.decode_single_token_bytes(int(token_id)))
    except KeyError:
        return f"<id {int(token_id)}: no text>"
