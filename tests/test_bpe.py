"""pipeline.bpe: learning merges, and replaying them the way tiktoken encodes."""
import os

import pytest
import tiktoken

from pipeline.bpe import GPT2_PAT, bpe_replay, learn_bpe, pretokenize, ranks_from_merges, segment
from pipeline.tokenizer import load_tokenizer

DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "austen")

SAMPLE = ("It is a truth universally acknowledged, that a single man in possession of a good "
          "fortune, must be in want of a wife. However little known the feelings or views of "
          "such a man may be on his first entering a neighbourhood, this truth is so well fixed "
          "in the minds of the surrounding families, that he is considered the rightful "
          "property of some one or other of their daughters. \"My dear Mr. Bennet,\" said his "
          "lady to him one day, \"have you heard that Netherfield Park is let at last?\"\n\n"
          "Mr. Bennet replied that he had not. It's 1813; they'd 4,000 a year.\t caf\u00e9 "
          "\u4f60\u597d \U0001F600\n")


def test_first_merges_counted_by_hand():
    """Pre-tokens (GPT-2 pattern): "low", " lower", " lowest", " newer", " wider".
    Pair counts: l-o 3, o-w 3, w-e 3, e-r 3, " "-l 2, the rest 1.
      1. four pairs tie at 3; the smallest bytes win: e+r -> "er".
      2. now l-o 3, o-w 3 (w-e is 1: lower and newer end in "er"): l+o -> "lo".
      3. lo-w 3 -> "low".
      4. " "-low 2 (lower, lowest) -> " low"; every other pair occurs once: stop."""
    assert pretokenize("low lower lowest newer wider") == ["low", " lower", " lowest", " newer",
                                                          " wider"]
    merges = learn_bpe("low lower lowest newer wider", 10)
    assert [(m.left, m.right, m.count) for m in merges] == [
        (b"e", b"r", 3), (b"l", b"o", 3), (b"lo", b"w", 3), (b" ", b"low", 2)]
    assert [m.rank for m in merges] == [256, 257, 258, 259]
    assert merges[3].merged == b" low"


def test_record_top_lists_the_leading_pairs():
    merges = learn_bpe("low lower lowest newer wider", 2, record_top=5)
    assert merges[0].top_pairs[:4] == ((b"e", b"r", 3), (b"l", b"o", 3), (b"o", b"w", 3),
                                       (b"w", b"e", 3))
    assert merges[0].top_pairs[4] == (b" ", b"l", 2)


def test_ranks_from_merges_round_trip_through_tiktoken():
    merges = learn_bpe(SAMPLE, 60)
    ranks = ranks_from_merges(merges)
    assert len(ranks) == 256 + len(merges)
    assert sorted(ranks.values()) == list(range(len(ranks)))
    enc = tiktoken.Encoding("sample", pat_str=GPT2_PAT, mergeable_ranks=ranks, special_tokens={})
    for text in [SAMPLE, "  leading and trailing  ", "\u00df\u00e9\U0001F468\u200D\U0001F469",
                 "new words nobody saw: zyxwv 98765"]:
        ids = enc.encode_ordinary(text)
        assert enc.decode(ids) == text
    assert len(enc.encode_ordinary(SAMPLE)) < len(SAMPLE.encode("utf-8")) * 0.7  # it compresses


@pytest.fixture(scope="module")
def default_tokenizer():
    return load_tokenizer(DEFAULT_MODEL)


def ranks_of(enc):
    return {enc.decode_single_token_bytes(i): i for i in range(enc.n_vocab)
            if i not in {enc.encode_single_token(s) for s in enc.special_tokens_set}}


def test_bpe_replay_ends_where_tiktoken_does(default_tokenizer):
    enc = default_tokenizer
    ranks = ranks_of(enc)
    words = sorted(set(pretokenize(SAMPLE * 2 + " unaccountably Elizabeth's Pemberley "
                                   "disinterestedness \u00e9\u00e9\u00e9 ")))
    assert len(words) > 80
    for word in words:
        steps = bpe_replay(ranks, word.encode("utf-8"))
        final_parts, last_merge = steps[-1]
        assert last_merge is None
        assert [ranks[p] for p in final_parts] == enc.encode_ordinary(word), word
        # each step merges exactly one adjacent pair
        for (parts, i), (after, _) in zip(steps, steps[1:], strict=False):
            assert after == parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]


def test_segment_agrees_with_an_encoding_of_the_same_merges():
    merges = learn_bpe(SAMPLE, 80)
    enc = tiktoken.Encoding("sample", pat_str=GPT2_PAT, mergeable_ranks=ranks_from_merges(merges),
                            special_tokens={})
    for text in [SAMPLE, "the fortune of their neighbourhood, in possession", "It's 1813!!\n\n"]:
        pieces = segment(text, merges)
        assert pieces == [enc.decode_single_token_bytes(i) for i in enc.encode_ordinary(text)]
