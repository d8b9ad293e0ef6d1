"""Tokenizers, always as a `tiktoken.Encoding`.

`load_tokenizer(directory)` reads whichever of these the directory holds:
  - tokenizer.tiktoken (base64 token + rank per line) and tiktoken_config.json
    ({"pat_str": ..., "special_tokens": {...}}): the project's own format;
  - vocab.json + merges.txt: Hugging Face byte-level BPE, GPT-2 style (a tokenizer.json next to
    them, if any, supplies the pre-tokenizer pattern and added tokens);
  - tokenizer.json alone, when its model is a byte-level BPE (Llama 3 style).

How a byte-level BPE becomes a tiktoken Encoding. GPT-2's files write each byte as a printable
character (`bytes_to_unicode`: the space is "Ġ", the newline "Ċ"); inverting that map gives each
token's bytes. Hugging Face's BPE applies the merges in merges.txt order; tiktoken instead merges
the adjacent pair whose concatenation has the lowest rank, and uses that rank as the token id.
The two agree when every merge makes a new token and the ids of merged tokens rise in merge
order, as they do in GPT-2's files (tiktoken's own GPT-2 encoding is built on this) and in any
vocabulary the `tokenizers` trainer writes. The loader checks that and refuses, saying why,
when a vocabulary breaks it: tiktoken could not reproduce that tokenizer with its ids.
"""
import base64
import binascii
import json
import os

import tiktoken

from .bpe import GPT2_PAT

RANKS_FILE = "tokenizer.tiktoken"
TIKTOKEN_CONFIG = "tiktoken_config.json"
VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
ADDED_TOKENS = "added_tokens.json"


class TokenizerLoadError(ValueError):
    """A tokenizer directory is missing a file, or a file cannot be read as a tokenizer."""


# ---- the project's tiktoken format ---------------------------------------------------------------

def read_ranks(path: str) -> dict:
    """tiktoken's ranks file: one `base64(token) rank` per line."""
    ranks = {}
    with open(path, "rb") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
            except (ValueError, binascii.Error) as e:
                raise TokenizerLoadError(f"{path}, line {n}: expected `base64-token rank`, "
                                         f"got {line[:60]!r} ({e})") from None
    if not ranks:
        raise TokenizerLoadError(f"{path}: no tokens")
    return ranks


def load_tiktoken_dir(directory: str, name: str = None) -> tiktoken.Encoding:
    ranks_path = _require(directory, RANKS_FILE, with_file=TIKTOKEN_CONFIG)
    config_path = _require(directory, TIKTOKEN_CONFIG, with_file=RANKS_FILE)
    ranks = read_ranks(ranks_path)
    cfg = _read_json(config_path)
    if not isinstance(cfg, dict) or not isinstance(cfg.get("pat_str"), str):
        raise TokenizerLoadError(f"{config_path}: expected an object with a \"pat_str\" string")
    return _encoding(directory, name, cfg["pat_str"], ranks, cfg.get("special_tokens", {}),
                     source=ranks_path)


# ---- Hugging Face byte-level BPE -----------------------------------------------------------------

def bytes_to_unicode() -> dict:
    """GPT-2's map from each byte to a printable character (printable bytes map to themselves,
    the others to code points from 256 on), so that merges.txt can be a plain text file."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def token_bytes(token: str) -> bytes:
    """'Ġthe' -> b' the'. Raises KeyError for a character outside GPT-2's byte alphabet."""
    return bytes(CHAR_TO_BYTE[c] for c in token)


def load_vocab_merges(directory: str, name: str = None) -> tiktoken.Encoding:
    """vocab.json + merges.txt (GPT-2's files) as a tiktoken Encoding with the same ids."""
    vocab_path = _require(directory, VOCAB_FILE, with_file=MERGES_FILE)
    merges_path = _require(directory, MERGES_FILE, with_file=VOCAB_FILE)
    vocab = _read_json(vocab_path)
    merges = []
    with open(merges_path, encoding="utf-8", errors="strict") as f:
        try:
            lines = f.read().splitlines()
        except UnicodeDecodeError as e:
            raise TokenizerLoadError(f"{merges_path}: not UTF-8 text ({e})") from None
    for n, line in enumerate(lines, start=1):
        if (n == 1 and line.startswith("#version")) or not line.strip():
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise TokenizerLoadError(f"{merges_path}, line {n}: expected two tokens separated "
                                     f"by one space, got {line[:60]!r}")
        merges.append((parts[0], parts[1], f"{merges_path}, line {n}"))
    hf = _read_tokenizer_json(directory)
    pat_str = _pattern(hf, os.path.join(directory, TOKENIZER_JSON)) if hf else GPT2_PAT
    return _byte_level_encoding(directory, name, vocab, merges, pat_str,
                                _added_tokens(directory, hf), source=vocab_path)


def load_tokenizer_json(directory: str, name: str = None) -> tiktoken.Encoding:
    """tokenizer.json alone, when it describes a byte-level BPE."""
    path = os.path.join(directory, TOKENIZER_JSON)
    hf = _read_tokenizer_json(directory)
    model = hf.get("model") if isinstance(hf, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE":
        raise TokenizerLoadError(f"{path}: only a BPE model can be read (found "
                                 f"{model.get('type') if isinstance(model, dict) else None!r})")
    if not isinstance(model.get("vocab"), dict) or not isinstance(model.get("merges"), list):
        raise TokenizerLoadError(f"{path}: model.vocab or model.merges is missing")
    merges = []
    for n, m in enumerate(model["merges"]):
        pair = m.split(" ") if isinstance(m, str) else m     # "a b" (older) or ["a", "b"]
        if not isinstance(pair, list) or len(pair) != 2:
            raise TokenizerLoadError(f"{path}: model.merges[{n}] is not a pair: {m!r}")
        merges.append((pair[0], pair[1], f"{path}, model.merges[{n}]"))
    return _byte_level_encoding(directory, name, model["vocab"], merges, _pattern(hf, path),
                                _added_tokens(directory, hf), source=path)


def _byte_level_encoding(directory, name, vocab, merges, pat_str, added, source,
                         missing_bytes_from=None):
    """missing_bytes_from: None refuses a vocabulary without all 256 single bytes; an id gives
    each missing byte an id of its own from there on (past the model's rows: text holding such
    a byte encodes, but no model can run it; llama.cpp and Hugging Face drop those bytes)."""
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise TokenizerLoadError(f"{source}: expected an object mapping token -> integer id")
    by_id = {}
    for token, i in vocab.items():
        if i in by_id:
            raise TokenizerLoadError(f"{source}: id {i} is given to both {by_id[i]!r} and "
                                     f"{token!r}")
        by_id[i] = token

    ranks = {}                                               # token bytes -> id
    for b, c in BYTE_TO_CHAR.items():
        if c not in vocab and missing_bytes_from is not None:
            ranks[bytes([b])] = missing_bytes_from
            missing_bytes_from += 1
            continue
        if c not in vocab:
            raise TokenizerLoadError(
                f"{source}: the single-byte token {c!r} (byte 0x{b:02x}) is missing; a "
                f"byte-level BPE vocabulary holds all 256 bytes")
        ranks[bytes([b])] = vocab[c]

    made_by = {}                                             # merged token -> where
    last_id, last_where = -1, None
    for left, right, where in merges:
        for part in (left, right):
            if part not in vocab:
                raise TokenizerLoadError(f"{where}: {part!r} is not in the vocabulary")
        merged = left + right
        if merged not in vocab:
            raise TokenizerLoadError(f"{where}: the merged token {merged!r} is not in the "
                                     f"vocabulary")
        if merged in made_by:
            raise TokenizerLoadError(
                f"{where}: {left!r} + {right!r} makes {merged!r}, which {made_by[merged]} "
                f"already made. tiktoken gives each token one rank, so it cannot apply the "
                f"second merge at its own place in the order: this tokenizer cannot be "
                f"reproduced as a tiktoken Encoding")
        i = vocab[merged]
        if i <= last_id:
            raise TokenizerLoadError(
                f"{where}: the merge {left!r} + {right!r} makes id {i}, but the merge before it "
                f"({last_where}) made id {last_id}. tiktoken merges pairs in order of the "
                f"merged token's id, Hugging Face in merges.txt order; they only agree when "
                f"the ids rise with the merge order, so these ids cannot be kept")
        try:
            ranks[token_bytes(merged)] = i
        except KeyError:
            raise TokenizerLoadError(f"{where}: {merged!r} holds a character outside GPT-2's "
                                     f"byte alphabet: not a byte-level BPE") from None
        made_by[merged], last_id, last_where = where, i, where

    # What remains of the vocabulary is no single byte and no merge's result: BPE can never
    # produce it from text. These are the special tokens (<|endoftext|>); tiktoken matches them
    # in text only when asked (allowed_special) and decodes them to their literal string.
    ids_of_ranks = set(ranks.values())
    special = {t: i for t, i in vocab.items() if i not in ids_of_ranks}
    for t, i in added.items():
        if t not in vocab:
            if i in by_id or i in special.values():
                raise TokenizerLoadError(f"{directory}: added token {t!r} has id {i}, already "
                                         f"taken by {by_id.get(i)!r}")
            special[t] = i
    return _encoding(directory, name, pat_str, ranks, special, source=source)


def _pattern(hf: dict, path: str) -> str:
    """The pre-tokenizer regex a tokenizer.json describes, if tiktoken can do the same."""
    if hf.get("normalizer"):
        raise TokenizerLoadError(f"{path}: has a normalizer ({hf['normalizer'].get('type')}), "
                                 f"which a tiktoken Encoding cannot apply")
    pre = hf.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    if (len(steps) == 1 and steps[0].get("type") == "ByteLevel"
            and steps[0].get("use_regex", True) and not steps[0].get("add_prefix_space")):
        return GPT2_PAT                                      # GPT-2's own pattern
    if (len(steps) == 2 and steps[0].get("type") == "Split"
            and "Regex" in (steps[0].get("pattern") or {})
            and steps[0].get("behavior") == "Isolated" and not steps[0].get("invert")
            and steps[1].get("type") == "ByteLevel" and not steps[1].get("use_regex", True)
            and not steps[1].get("add_prefix_space")):
        return steps[0]["pattern"]["Regex"]                  # Llama 3 / cl100k style
    raise TokenizerLoadError(f"{path}: pre-tokenizer {json.dumps(pre)[:120]} is not one a "
                             f"tiktoken Encoding can reproduce")


def _added_tokens(directory: str, hf: dict) -> dict:
    """Added (special) tokens: content -> id, from tokenizer.json, tokenizer_config.json or
    added_tokens.json, whichever exist."""
    added = {}
    for t in (hf or {}).get("added_tokens", []):
        added[t["content"]] = t["id"]
    path = os.path.join(directory, TOKENIZER_CONFIG)
    if os.path.exists(path):
        cfg = _read_json(path)
        for i, t in (cfg.get("added_tokens_decoder") or {}).items():
            added[t["content"]] = int(i)
    path = os.path.join(directory, ADDED_TOKENS)
    if os.path.exists(path):
        added.update(_read_json(path))
    return added


def _read_tokenizer_json(directory: str):
    path = os.path.join(directory, TOKENIZER_JSON)
    return _read_json(path) if os.path.exists(path) else None


# ---- either format -------------------------------------------------------------------------------

def load_tokenizer(directory: str, name: str = None) -> tiktoken.Encoding:
    """The tokenizer in a model directory, whichever format it is in (see the module docstring).

    Raises TokenizerLoadError naming the file that is missing or cannot be read.
    """
    def has(f):
        return os.path.exists(os.path.join(directory, f))

    if not os.path.isdir(directory):
        raise TokenizerLoadError(f"{directory}: not a directory")
    if has(RANKS_FILE) or has(TIKTOKEN_CONFIG):
        return load_tiktoken_dir(directory, name)
    if has(VOCAB_FILE) or has(MERGES_FILE):
        return load_vocab_merges(directory, name)
    if has(TOKENIZER_JSON):
        return load_tokenizer_json(directory, name)
    raise TokenizerLoadError(f"{directory}: no tokenizer: expected {RANKS_FILE} + "
                             f"{TIKTOKEN_CONFIG}, or {VOCAB_FILE} + {MERGES_FILE}, or "
                             f"{TOKENIZER_JSON}")


# ---- what a BPE replay needs from a loaded tokenizer
# -----------------------------------------------

def mergeable_ranks(tokenizer) -> dict:
    """token bytes -> rank (= token id), from tiktoken's public API.

    tiktoken keeps its ranks in a private attribute; `token_byte_values()` lists every mergeable
    token and `encode_single_token` gives its rank, which works for any tiktoken Encoding.
    """
    return {b: tokenizer.encode_single_token(b) for b in tokenizer.token_byte_values()}


def pretokenizer_pattern(directory: str) -> str:
    """The regex that splits text into words before BPE, read from a model directory's files as
    load_tokenizer reads it (tiktoken does not expose it): tiktoken_config.json's pat_str, a
    tokenizer.json's pre-tokenizer, or GPT-2's pattern for vocab.json + merges.txt alone.
    (A .gguf file's: pipeline.loader.pretokenizer_pattern, which reads either.)"""
    if directory and str(directory).lower().endswith(".gguf") and os.path.isfile(directory):
        raise TokenizerLoadError(f"{directory}: a GGUF file, not a tokenizer directory "
                                 "(pipeline.loader.pretokenizer_pattern reads its pattern)")
    if not directory or not os.path.isdir(directory):
        return GPT2_PAT
    if is_tiktoken_dir(directory):
        config = _read_json(os.path.join(directory, TIKTOKEN_CONFIG))
        return config.get("pat_str", GPT2_PAT) if isinstance(config, dict) else GPT2_PAT
    hf = _read_tokenizer_json(directory)
    return _pattern(hf, os.path.join(directory, TOKENIZER_JSON)) if hf else GPT2_PAT


def is_tiktoken_dir(directory: str) -> bool:
    """True when the directory holds the project's own format (tiktoken_config.json), the one
    training/train_tokenizer.py writes. False for a .gguf file."""
    return bool(directory) and os.path.exists(os.path.join(directory, TIKTOKEN_CONFIG))


def _require(directory: str, filename: str, with_file: str) -> str:
    path = os.path.join(directory, filename)
    if not os.path.isfile(path):
        raise TokenizerLoadError(f"{path}: missing (it goes with {with_file})")
    return path


def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TokenizerLoadError(f"{path}: not valid JSON ({e})") from None


def _encoding(directory, name, pat_str, ranks, special, source) -> tiktoken.Encoding:
    try:
        return tiktoken.Encoding(name or os.path.basename(os.path.normpath(directory)),
                                 pat_str=pat_str, mergeable_ranks=ranks,
                                 special_tokens=special)
    except (ValueError, TypeError) as e:
        raise TokenizerLoadError(f"{source}: tiktoken rejects this vocabulary ({e})") from None


def id_bytes(tokenizer, token_id: int) -> bytes:
    """The bytes of one token id. An id the model has but the tokenizer lacks (some checkpoints
    pad their vocabulary, and a model can sample such an id) is named as such, not raised on."""
    try:
        return tokenizer.decode_single_token_bytes(int(token_id))
    except KeyError:
        return f"<id {int(token_id)}: no text>".encode()
