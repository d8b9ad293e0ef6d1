"""A SentencePiece-style BPE vocabulary as GGUF files carry it (tokenizer.ggml.model "llama":
Llama 1 and 2, Mistral 7B, TinyLlama, Phi-3, Gemma...), with the interface the engine uses of a
tiktoken Encoding (encode, encode_ordinary, decode, decode_single_token_bytes, n_vocab...).

    tokens     the pieces; a space is written "▁" (U+2581), "▁the" is " the"
    scores     one float per piece: the higher, the earlier two pieces merge into it
    token_type NORMAL, UNKNOWN (<unk>), CONTROL (<s>, </s>), USER_DEFINED, BYTE (<0x00>..<0xFF>)

Encoding a text, as llama.cpp's llm_tokenizer_spm does:
  1. every space becomes "▁", and one "▁" is put in front (tokenizer.ggml.add_space_prefix,
     default true), so "Hello world" is "▁Hello▁world";
  2. the text is cut into its characters; then, again and again, the two adjacent pieces whose
     concatenation is a token with the highest score are merged (the leftmost pair on a tie),
     until no adjacent pair makes a token;
  3. a piece that is no token (a character the vocabulary lacks) is written as its UTF-8
     bytes, one <0xXX> token each (byte fallback).
Scores, not ids, order the merges: unlike a byte-level BPE (pipeline.tokenizer), this cannot be
a tiktoken Encoding, whose merge order is its ids; nor can a byte-level replay by rank
(pipeline.bpe.bpe_replay) show it. `SentencePieceBPE.replay(text)` (merge_replay) gives the
merges of step 2 one by one: the pieces, the pair merged and the merged piece's score.

Special tokens (CONTROL and USER_DEFINED) are matched whole only where `allowed_special` says,
as tiktoken does. The "▁" prefix is Hugging Face's Metaspace(prepend_scheme="first"), which
transformers' GGUF tokenizer (LlamaTokenizer) uses: at the start of the text only, not after a
special token, and not when the text already starts with a space (" hi" is "▁hi", as "hi" is).
llama.cpp and SentencePiece itself put one there too ("▁▁hi") and after a special token: the
two differ only on such texts. Phi-3's files are read as transformers reads them
(prefix_every_segment: a normalizer puts "▁" before every piece of text between special tokens,
even one that starts with a space, as llama.cpp does). Decoding joins the pieces' bytes and
drops one leading space, as Hugging Face's decoder (Strip) does: so " hi" comes back as "hi"
(Phi-3: " hi" is "▁▁hi" and comes back whole).
"""
import heapq
import re

SPACE = "\u2581"                       # ▁, SentencePiece's space
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6   # gguf.TokenType
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class SentencePieceBPE:
    def __init__(self, name, tokens, scores, types, add_space_prefix=True, unk_id=None,
                 prefix_every_segment=False):
        if not (len(tokens) == len(scores) == len(types)):
            raise ValueError(f"{len(tokens)} tokens, {len(scores)} scores, {len(types)} types")
        self.name = name
        self.tokens = list(tokens)
        self.scores = [float(s) for s in scores]
        self.types = [int(t) for t in types]
        self.add_space_prefix = bool(add_space_prefix)
        self.prefix_every_segment = bool(prefix_every_segment)
        self.vocab = {}                                      # piece -> id (the first, if twice)
        for i, t in enumerate(self.tokens):
            self.vocab.setdefault(t, i)
        self.byte_ids = {}                                   # byte value -> id of <0xXX>
        self._bytes = []                                     # id -> what it decodes to
        for i, (t, k) in enumerate(zip(self.tokens, self.types, strict=False)):
            m = _BYTE_TOKEN.fullmatch(t) if k == BYTE else None
            if m:
                self.byte_ids.setdefault(int(m.group(1), 16), i)
                self._bytes.append(bytes([int(m.group(1), 16)]))
            elif k in (CONTROL, USER_DEFINED, UNKNOWN):
                self._bytes.append(t.encode("utf-8"))
            else:
                self._bytes.append(t.replace(SPACE, " ").encode("utf-8"))
        self.unk_id = unk_id if unk_id is not None else next(
            (i for i, k in enumerate(self.types) if k == UNKNOWN), None)
        self.special = {t: i for i, (t, k) in enumerate(zip(self.tokens, self.types, strict=False))
                        if k in (CONTROL, USER_DEFINED) and t}
        # bytes -> id for the ordinary pieces (a BPE replay's view; <0xXX> only where no piece
        # spells that byte)
        self._mergeable_ranks = {}
        for kind in (NORMAL, BYTE):
            for i, (b, k) in enumerate(zip(self._bytes, self.types, strict=False)):
                if k == kind:
                    self._mergeable_ranks.setdefault(b, i)

    def __repr__(self):
        return f"<SentencePieceBPE {self.name!r} ({self.n_vocab} pieces)>"

    # --- what the engine reads of a tokenizer ---

    @property
    def n_vocab(self) -> int:
        return len(self.tokens)

    @property
    def special_tokens_set(self) -> set:
        return set(self.special)

    def token_byte_values(self) -> list:
        return list(self._mergeable_ranks)

    def encode_single_token(self, piece) -> int:
        if isinstance(piece, str):
            if piece in self.vocab:
                return self.vocab[piece]
            piece = piece.encode("utf-8")
        if piece in self._mergeable_ranks:
            return self._mergeable_ranks[piece]
        text = piece.decode("utf-8", errors="strict")
        if text in self.special:
            return self.special[text]
        raise KeyError(piece)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        if not 0 <= int(token_id) < len(self._bytes):
            raise KeyError(token_id)
        return self._bytes[int(token_id)]

    def decode_bytes(self, ids) -> bytes:
        return b"".join(self.decode_single_token_bytes(i) for i in ids)

    def decode(self, ids, errors: str = "replace") -> str:
        text = self.decode_bytes(ids).decode("utf-8", errors=errors)
        if self.add_space_prefix and text.startswith(" "):
            text = text[1:]
        return text

    def encode_ordinary(self, text: str) -> list:
        return self._encode_text(text, first=True)

    def encode(self, text: str, allowed_special=frozenset(), disallowed_special="all") -> list:
        allowed = set(self.special) if allowed_special == "all" else set(allowed_special)
        allowed &= set(self.special)                     # only the vocabulary's own
        disallowed = (set(self.special) - allowed if disallowed_special == "all"
                      else set(disallowed_special))
        for t in disallowed:
            if t in text:
                raise ValueError(f"the text contains the special token {t!r}, which is not "
                                 "allowed (allowed_special)")
        if not allowed:
            return self.encode_ordinary(text)
        pattern = "|".join(re.escape(t) for t in sorted(allowed, key=len, reverse=True))
        ids, at = [], 0
        for m in re.finditer(pattern, text):
            if m.start() > at:
                ids += self._encode_text(text[at:m.start()], first=at == 0)
            ids.append(self.special[m.group()])
            at = m.end()
        if at < len(text):
            ids += self._encode_text(text[at:], first=at == 0)
        return ids

    # --- the SentencePiece merge ---

    def _encode_text(self, text: str, first: bool) -> list:
        if not text:
            return []
        return self._pieces_to_ids(merge_pieces(self.spelled(text, first), self.vocab,
                                                self.scores))

    def spelled(self, text: str, first: bool = True) -> str:
        """The text as the merge sees it: spaces as "▁", and the "▁" put in front (see the
        module docstring; first: the text starts the input, not after a special token)."""
        text = text.replace(" ", SPACE)
        if self.prefix_every_segment and self.add_space_prefix:
            return SPACE + text
        if self.add_space_prefix and first and not text.startswith(SPACE):
            return SPACE + text
        return text

    def replay(self, text: str) -> list:
        """What encode_ordinary(text) does, merge by merge: [(pieces, merged_at, score)]
        (merge_replay). The last step's pieces, through piece_ids, are encode_ordinary(text)."""
        return merge_replay(self.spelled(text), self.vocab, self.scores) if text else []

    def piece_ids(self, piece: str) -> list:
        """The id of one piece, or the ids it falls back to (its bytes' <0xXX>, else <unk>)."""
        return self._pieces_to_ids([piece])

    def _pieces_to_ids(self, pieces) -> list:
        ids = []
        for p in pieces:
            if p in self.vocab:
                ids.append(self.vocab[p])
                continue
            for b in p.encode("utf-8"):                      # byte fallback
                if b in self.byte_ids:
                    ids.append(self.byte_ids[b])
                elif self.unk_id is not None:
                    ids.append(self.unk_id)
                else:
                    raise ValueError(f"{p!r}: no token, no <0x{b:02X}> and no <unk>")
        return ids


def merge_pieces(text: str, vocab: dict, scores: list, record=None) -> list:
    """SentencePiece BPE: the characters of `text` merged pairwise, best-scoring token first.
    record(left, right, merged, score), when given, is told every merge in the order made."""
    syms = list(text)
    n = len(syms)
    nxt = list(range(1, n)) + [-1]
    prev = list(range(-1, n - 1))
    heap = []

    def push(left, right):
        if left < 0 or right < 0:
            return
        piece = syms[left] + syms[right]
        i = vocab.get(piece)
        if i is not None:
            heapq.heappush(heap, (-scores[i], left, right, piece))

    for i in range(n - 1):
        push(i, i + 1)
    while heap:
        neg_score, left, right, piece = heapq.heappop(heap)
        if (syms[left] is None or syms[right] is None or nxt[left] != right
                or syms[left] + syms[right] != piece):
            continue                                        # outdated by an earlier merge
        if record is not None:
            record(left, right, piece, -neg_score)
        syms[left], syms[right] = piece, None
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prev[nxt[right]] = left
        push(prev[left], left)
        push(left, nxt[left])
    return [s for s in syms if s is not None]


def merge_replay(text: str, vocab: dict, scores: list) -> list:
    """The steps of merge_pieces on `text` (already spelled with "▁"), as a page replays them:
    [(pieces, merged_at, score)], the characters first; merged_at is the index in `pieces` of
    the pair merged to reach the next step and score the merged piece's score (None, None on the
    last step, whose pieces are merge_pieces' own)."""
    alive = list(range(len(text)))            # position in the symbol array of each piece
    pieces = list(text)
    steps = []

    def record(left, right, piece, score):
        at = alive.index(left)
        assert alive[at + 1] == right
        steps.append((list(pieces), at, score))
        pieces[at:at + 2] = [piece]
        del alive[at + 1]

    final = merge_pieces(text, vocab, scores, record)
    assert final == pieces
    steps.append((pieces, None, None))
    return steps
