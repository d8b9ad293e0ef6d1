"""Tokenization: the prompt as tokens and ids, BPE merges replayed, BPE learned, other encodings.

Everything shown comes from the running tokenizer (`tiktoken.Encoding`, or a SentencePiece
vocabulary, `pipeline.spm.SentencePieceBPE`) or from the project's BPE code in `pipeline/bpe.py`
run on the user's own text. The replay is the tokenizer's own kind: a byte-level BPE merges the
pair of lowest rank (`pipeline.bpe.bpe_replay`), a SentencePiece vocabulary the pair whose merged
piece scores highest (`pipeline.spm.merge_replay`); any other tokenizer gets a sentence, no replay.
"""
import re
from collections import Counter
from dataclasses import dataclass

import tiktoken
from flask import current_app, has_app_context

from pipeline.bpe import bpe_replay, learn_bpe, merge_pair, pretokenize, segment
from pipeline.spm import SPACE, SentencePieceBPE, merge_pieces, merge_replay
from web.core.cache import memoized
from web.core.params import Param
from web.figures import tokenization as figures
from web.presentation.tokens import pieces, plain, token_pieces
from web.sections import Section

MAX_MERGES = 60            # most merges the learn-BPE demo runs (slider's upper end)
TOP_PAIRS = 8              # rows of the pair-count table
SAMPLE_TEXT = ("a rat sat on a mat; the rats sat on the mats, "
               "and the cat that sat on the hat sat on the rat.")

PARAMS = (
    Param("word", "Word to replay", kind="int", min=0, max=9999, resets_with_prompt=True),
    Param("step", "Merge step", kind="int", default=0, min=0, max=9999,
          resets_with_prompt=True),
    Param("bpe_text", "Text to learn from", default=SAMPLE_TEXT, max_chars=2000,
          required=True),
    Param("merges", "Number of merges", kind="int", default=5, min=0, max=MAX_MERGES),
)


@dataclass(frozen=True)
class Token:
    id: int               # None: a SentencePiece symbol that is no piece of the vocabulary
    pieces: list          # [(kind, text)] see web.presentation.tokens.pieces


def tokenizer_kind(tok) -> str:
    """"sentencepiece" (merged by score), "byte-level" (a tiktoken Encoding: merged by rank) or
    "other" (no merge replay this page can show)."""
    if isinstance(tok, SentencePieceBPE):
        return "sentencepiece"
    if isinstance(tok, tiktoken.Encoding):
        return "byte-level"
    return "other"


def build(lm, state) -> dict:
    """Template context for the tokenization section."""
    tok = lm.tokenizer
    prompt = state["prompt"]
    # User text is encoded as ordinary text: "<|endoftext|>" typed in a prompt is not the
    # special token (APIs do the same with user text).
    ids = tok.encode_ordinary(prompt)
    specials = sorted(s for s in tok.special_tokens_set if s in prompt)
    tokens = [Token(i, token_pieces(tok, i)) for i in ids]
    # the other models' tokenizers this server has (Austen's 4,096-token BPE, SmolLM2's 49,152
    # tokens: their counts differ on every prompt), then the tiktoken encodings that loaded (the
    # operator is told of the others once, at start-up)
    others = [dict(name=o.name, used_by=o.used_by, source=o.name,
                   n_tokens=len(o.tokenizer.encode_ordinary(prompt)))
              for o in page_tokenizers(lm)]
    others += [dict(name=o.name, used_by=o.used_by, source=o.source,
                    n_tokens=len(o.encoding.encode_ordinary(prompt)))
               for o in lm.other_encodings if o.encoding is not None]
    ctx = dict(
        tokens=tokens, n_tokens=len(ids), n_chars=len(prompt),
        n_bytes=len(prompt.encode("utf-8")), chars_per_token=len(prompt) / max(1, len(ids)),
        specials=specials, model_name=lm.name, **vocabulary_of(lm),
        own_tokenizer=lm.own_tokenizer, model_merges=len(lm.ranks) - 256,
        others=others,
        encodings_figure=figures.encodings_figure(
            [(lm.name + " (this model)", len(ids))]
            + [(o["name"], o["n_tokens"]) for o in others]),
    )
    ctx.update(replay(lm, state, prompt))
    ctx.update(learn(state))
    return ctx


def vocabulary_of(lm) -> dict:
    """The vocabulary's size as the model's file gives it (its embedding rows), and the single
    bytes added past it: tiktoken needs a token for each of the 256 bytes, and SmolLM2's file
    has none for 21 of them (pipeline.gguf_file.read_tokenizer gives them ids 49,152 to 49,172,
    which the model has no row for). tok.n_vocab (49,173) counts both."""
    tok, rows = lm.tokenizer, lm.model.config.vocab_size
    added = sorted(i for i in tok._mergeable_ranks.values() if i >= rows)
    return dict(vocab_size=rows if added else tok.n_vocab, added_bytes=added,
                n_tokenizer_ids=tok.n_vocab)


@dataclass(frozen=True)
class PageTokenizer:
    name: str
    used_by: str
    tokenizer: object        # the model's own tiktoken.Encoding


def page_tokenizers(lm) -> list:
    """The tokenizers of the other models this server offers
    (web.model_state.explainer.Explainer.models),
    one per vocabulary that differs from lm's: the same prompt in a 4,096-token and a
    49,152-token vocabulary."""
    if not has_app_context() or "explainer" not in current_app.extensions:
        return []
    seen, found = {lm.tokenizer.n_vocab}, []
    for other in list(current_app.extensions["explainer"].models.values()):
        n = other.tokenizer.n_vocab
        if other is lm or n in seen:
            continue
        seen.add(n)
        title = other.card.title if other.card else other.name
        found.append(PageTokenizer(
            title, f"the other model on this page ({other.model.config.vocab_size:,}-token "
                   "vocabulary)", other.tokenizer))
    return found


def default_word(words: list) -> int:
    """The longest word (in bytes) of the prompt: the one with the most merges to watch."""
    return max(range(len(words)), key=lambda i: (len(words[i].encode("utf-8")), -i))


def replay(lm, state, prompt) -> dict:
    kind = tokenizer_kind(lm.tokenizer)
    if kind == "sentencepiece":
        return dict(replay_kind=kind, **sentencepiece_replay(lm.tokenizer, state, prompt))
    if kind != "byte-level":
        return dict(replay_kind=kind)
    return dict(replay_kind=kind, **byte_level_replay(lm, state, prompt))


def byte_level_replay(lm, state, prompt) -> dict:
    words = pretokenize(prompt, lm.pat_str)
    word = state.index_within("word", len(words), "word", default=default_word(words))
    steps = bpe_replay(lm.ranks, words[word].encode("utf-8"))
    step = state.index_within("step", len(steps), "step",
                              f"this word takes {len(steps) - 1} merges, so it has")
    shown = []
    for parts, merged_at in steps:
        shown.append(dict(
            parts=[Token(lm.ranks[p], pieces(p)) for p in parts],
            merged_at=merged_at,
            pair=None if merged_at is None else (plain(parts[merged_at]),
                                                 plain(parts[merged_at + 1])),
            rank=None if merged_at is None else
            lm.ranks[parts[merged_at] + parts[merged_at + 1]]))
    final_ids = [t.id for t in shown[-1]["parts"]]
    return dict(
        words=[plain(w.encode("utf-8")) for w in words], word=word,
        steps=shown, step=step, last_step=len(steps) - 1,
        # the replay's last step must be what the tokenizer itself produced for this word
        replay_ids=final_ids, tokenizer_ids=lm.tokenizer.encode_ordinary(words[word]),
    )


def sentencepiece_words(spelled: str) -> list:
    """The text as SentencePiece merges it ("▁" for spaces) cut before each run of "▁": a word
    with the spaces before it ("▁▁b"), as its pieces are."""
    return re.findall(f"{SPACE}*[^{SPACE}]+|{SPACE}+", spelled)


def _spm_text(piece: str) -> bytes:
    return piece.replace(SPACE, " ").encode("utf-8")


def sentencepiece_replay(tok, state, prompt) -> dict:
    """One word of the prompt merged as the tokenizer merges the whole text: again and again
    the adjacent pair whose merged piece has the highest score. Merged word by word when that is
    exact for this text (the words' merges, joined, are the whole text's: no piece spans two
    words), else the whole text at once. The last step's pieces give the word's ids (a
    character with no piece: its bytes' <0xXX> tokens), checked against the tokenizer's own ids
    for the prompt at the same place."""
    spelled = tok.spelled(prompt)
    words = sentencepiece_words(spelled)
    finals = [merge_pieces(w, tok.vocab, tok.scores) for w in words]
    by_word = [p for f in finals for p in f] == merge_pieces(spelled, tok.vocab, tok.scores)
    if not by_word:
        words, finals = [spelled], [merge_pieces(spelled, tok.vocab, tok.scores)]
    word = state.index_within("word", len(words), "word",
                              default=default_word([w.replace(SPACE, " ") for w in words]))
    steps = merge_replay(words[word], tok.vocab, tok.scores)
    step = state.index_within("step", len(steps), "step",
                              f"this word takes {len(steps) - 1} merges, so it has")
    shown = []
    for parts, merged_at, score in steps:
        merged = None if merged_at is None else parts[merged_at] + parts[merged_at + 1]
        shown.append(dict(
            parts=[Token(tok.vocab.get(p), pieces(_spm_text(p))) for p in parts],
            merged_at=merged_at,
            pair=None if merged_at is None else (plain(_spm_text(parts[merged_at])),
                                                 plain(_spm_text(parts[merged_at + 1]))),
            merged_id=None if merged is None else tok.vocab[merged],
            score=None if score is None else float(score) + 0.0))      # + 0.0: no "-0"
    # the last step as tokens: a symbol with no piece falls back to its bytes' tokens
    last = steps[-1][0]
    final_ids = [i for p in last for i in tok.piece_ids(p)]
    shown[-1]["parts"] = [Token(i, pieces(tok.decode_single_token_bytes(i))) for i in final_ids]
    fallback = [p for p in last if p not in tok.vocab]
    before = sum(len(tok.piece_ids(p)) for f in finals[:word] for p in f)
    prompt_ids = tok.encode_ordinary(prompt)
    joined = [i for f in finals for p in f for i in tok.piece_ids(p)]
    return dict(
        words=[plain(_spm_text(w)) for w in words], word=word, by_word=by_word,
        steps=shown, step=step, last_step=len(steps) - 1,
        space_prefix=spelled.startswith(SPACE) and not prompt.startswith(" "),
        fallback=[plain(_spm_text(p)) for p in fallback],
        # the replay's last step must be what the tokenizer itself produced there
        replay_ids=final_ids, tokenizer_ids=prompt_ids[before:before + len(final_ids)],
        all_words_equal=joined == prompt_ids, n_prompt_ids=len(prompt_ids))


@memoized(64)
def learned_merges(text: str) -> tuple:
    return tuple(learn_bpe(text, MAX_MERGES, record_top=TOP_PAIRS))


def token_counts_by_merges(text: str, merges) -> list:
    """Tokens in `text` after 0, 1, ..., len(merges) merges.

    The same result as `len(segment(text, merges[:k]))` for every k, computed in one pass:
    each distinct word is merged once per merge and counted with its frequency.
    """
    words = Counter(pretokenize(text))
    parts = {w: [bytes([b]) for b in w.encode("utf-8")] for w in words}
    counts = [sum(len(parts[w]) * f for w, f in words.items())]
    for m in merges:
        for w in parts:
            parts[w] = merge_pair(parts[w], m.left, m.right, m.merged)
        counts.append(sum(len(parts[w]) * f for w, f in words.items()))
    return counts


def learn(state) -> dict:
    text, n = state["bpe_text"], state["merges"]
    merges = learned_merges(text)
    done = merges[:n]
    upcoming = merges[n] if n < len(merges) else None
    counts = token_counts_by_merges(text, merges)
    rows = [dict(rank=m.rank, left=plain(m.left), right=plain(m.right),
                 merged=plain(m.merged), count=m.count) for m in done]
    pair_rows = [dict(left=plain(a), right=plain(b), count=c)
                 for a, b, c in (upcoming.top_pairs if upcoming else ())]
    return dict(
        bpe_merges=rows, n_merges=n, n_done=len(done), stopped_early=len(merges) < n,
        n_learnable=len(merges), max_merges=MAX_MERGES,
        vocab_after=256 + len(done),
        segmented=[pieces(p) for p in segment(text, list(done))],
        upcoming=None if upcoming is None else dict(
            left=plain(upcoming.left), right=plain(upcoming.right),
            merged=plain(upcoming.merged), count=upcoming.count),
        pair_rows=pair_rows,
        text_tokens=counts[len(done)], text_bytes=counts[0],
        pairs_figure=figures.pair_counts_figure(pair_rows, len(done)) if pair_rows else None,
        counts_figure=figures.token_count_figure(counts, len(done)),
    )


SECTION = Section("tokenization", "Tokenization", PARAMS, build,
                  shorter="Tokens",
                  tour=("The model cannot read letters. A tokenizer cuts the text into pieces from "
                        "a fixed vocabulary and replaces each piece by its number (its id). The "
                        "vocabulary was learned by byte-pair encoding: start from single bytes, "
                        "and repeatedly glue together the pair that occurs most often. Watch the "
                        "real merges rebuild a word of your prompt."))
