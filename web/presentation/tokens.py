"""How token bytes are shown: token text as chips and one-line labels.

A token is a byte string. Shown as text, whitespace would be invisible and a token holding part
of a multi-byte UTF-8 character cannot be decoded at all. So every token is turned into a list
of pieces `(kind, text)`: kind "text" is literal text; "space", "newline", "tab", "cr" and
"control" are visible markers for whitespace; "byte" is one byte of an incomplete character,
written `<0xF0>`. Templates draw each kind in its own style, so a marker never looks like a
character the user typed.
"""
from pipeline.tokenizer import id_bytes

CHIP_COLOURS = 6      # the chip colours of static/style.css: classes c0 .. c5

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


def token_string(tokenizer, token_ids) -> str:
    """The text of a sequence of token ids (invalid UTF-8 replaced); an id past the tokenizer's
    vocabulary is named (pipeline.tokenizer.id_bytes)."""
    return b"".join(id_bytes(tokenizer, t) for t in token_ids).decode("utf-8", errors="replace")


def token_pieces(tokenizer, token_id: int) -> list:
    """`pieces` of one token id (one past the tokenizer's vocabulary is named, not raised)."""
    return pieces(id_bytes(tokenizer, token_id))


def token_plain(tokenizer, token_id: int) -> str:
    """`plain` text of one token id; an id the model has but the tokenizer lacks (some
    checkpoints pad their vocabulary) is named as such rather than raising."""
    return plain(id_bytes(tokenizer, token_id))


def chip_colour(token_id: int) -> int:
    """The colour of a token's chip (class c0 .. c5), a function of its id alone: the same
    token has the same colour wherever it is drawn, so a repeated token is seen to repeat.
    Fibonacci hashing (Knuth's multiplicative method: the fraction of id x 2^32 / golden ratio,
    times the number of colours) spreads the ids evenly over the colours and gives
    neighbouring ids different ones. templates/macros.html's chip_colour writes the same
    formula (a macro cannot call Python); tests/test_web_chips.py holds the two together."""
    return (int(token_id) * 2654435761) % 2**32 * CHIP_COLOURS // 2**32
