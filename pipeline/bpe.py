"""Byte-level BPE: learning merges, and replaying them on a word.

The algorithm the tokenization section teaches, and the one that learned the default model's
tokenizer: split text into pre-tokens (a regex), each pre-token into bytes; count adjacent pairs;
merge the most frequent pair into a new token; repeat. Each distinct pre-token is counted once
(with its frequency) and pair counts are updated only for the words a merge touches, so 4096
tokens are learned from ~4 MB of text in seconds.

Ties between equally frequent pairs go to the pair whose bytes sort first, so training is
deterministic.
"""
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import regex

# GPT-2's pre-tokenizer pattern: contractions, letters, digits, punctuation, each with an
# optional leading space; runs of whitespace.
GPT2_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
ENDOFTEXT = "<|endoftext|>"


@dataclass(frozen=True)
class Merge:
    rank: int                 # id of the new token (256 + merge index)
    left: bytes
    right: bytes
    count: int                # how often the pair occurred when it was merged
    top_pairs: tuple = field(default=())  # ((left, right, count), ...) the leading pairs then

    @property
    def merged(self) -> bytes:
        return self.left + self.right


def pretokenize(text: str, pat_str: str = GPT2_PAT) -> list:
    return regex.findall(pat_str, text)


def learn_bpe(text: str, n_merges: int, pat_str: str = GPT2_PAT, record_top: int = 0,
              words: Counter = None) -> list:
    """Learn up to `n_merges` merges from `text`; stops early when no pair occurs twice.

    `record_top` > 0 keeps, with each merge, the leading pairs by count at that step (for the
    learn-BPE-yourself table). `words` may be given instead of text: pre-token string -> count.
    """
    if words is None:
        words = Counter(pretokenize(text, pat_str))
    vocab = [bytes([i]) for i in range(256)]                 # token id -> bytes
    seqs = [list(w.encode("utf-8")) for w in words]          # each distinct word as ids
    freqs = list(words.values())
    pair_counts = Counter()
    where = defaultdict(set)                                 # pair -> indices of words holding it
    for wi, seq in enumerate(seqs):
        for pair in zip(seq, seq[1:], strict=False):
            pair_counts[pair] += freqs[wi]
            where[pair].add(wi)

    merges = []
    for _ in range(n_merges):
        if not pair_counts:
            break
        best = max(pair_counts.items(), key=lambda kv: (kv[1], _neg_bytes(vocab, kv[0])))
        (a, b), count = best
        if count < 2:
            break
        top = ()
        if record_top:
            ranked = sorted(pair_counts.items(),
                            key=lambda kv: (-kv[1], vocab[kv[0][0]] + b"\0" + vocab[kv[0][1]]))
            top = tuple((vocab[x], vocab[y], c) for (x, y), c in ranked[:record_top])
        new_id = len(vocab)
        vocab.append(vocab[a] + vocab[b])
        merges.append(Merge(new_id, vocab[a], vocab[b], count, top))
        for wi in list(where[(a, b)]):
            seq, f = seqs[wi], freqs[wi]
            # forget this word's old pairs
            for pair in zip(seq, seq[1:], strict=False):
                pair_counts[pair] -= f
                if pair_counts[pair] <= 0:
                    del pair_counts[pair]
                where[pair].discard(wi)
            seq = seqs[wi] = merge_pair(seq, a, b, new_id)
            for pair in zip(seq, seq[1:], strict=False):                   # and count its new ones
                pair_counts[pair] += f
                where[pair].add(wi)
        del where[(a, b)]
    return merges


def _neg_bytes(vocab, pair):
    # max() picks the highest count; among ties we want the smallest bytes, so invert them.
    joined = vocab[pair[0]] + b"\0" + vocab[pair[1]]
    return tuple(-c for c in joined)


def merge_pair(seq: list, a, b, new) -> list:
    """Replace every non-overlapping occurrence of (a, b) in seq, left to right, with new."""
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and seq[i] == a and seq[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


def ranks_from_merges(merges: list) -> dict:
    """tiktoken's mergeable_ranks: the 256 single bytes, then each merged token in order."""
    ranks = {bytes([i]): i for i in range(256)}
    for m in merges:
        ranks[m.merged] = m.rank
    return ranks


def segment(text: str, merges: list, pat_str: str = GPT2_PAT) -> list:
    """Apply learned merges in order to text; returns the pieces (bytes) of every pre-token."""
    pieces = []
    for word in pretokenize(text, pat_str):
        parts = [bytes([c]) for c in word.encode("utf-8")]
        for m in merges:
            parts = merge_pair(parts, m.left, m.right, m.merged)
        pieces.extend(parts)
    return pieces


def bpe_replay(mergeable_ranks: dict, word: bytes) -> list:
    """The steps a tiktoken-style encoder takes on one pre-token.

    Starts from single bytes; at each step merges the adjacent pair whose concatenation has the
    lowest rank (the earliest learned merge), until no adjacent pair is a token. Returns a list of
    steps: (parts, merged_index) where merged_index is the position of the pair merged to reach
    the next step (None on the last step).
    """
    parts = [bytes([c]) for c in word]
    steps = []
    while True:
        best, best_rank = None, None
        for i in range(len(parts) - 1):
            r = mergeable_ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        steps.append((list(parts), best))
        if best is None:
            return steps
        parts = parts[:best] + [parts[best] + parts[best + 1]] + parts[best + 2:]
