"""pipeline.tokenizer against Hugging Face's tokenizer, through ids it stored with each fixture
(tests/fixtures/models/<name>/tokenizer_reference.json, written by make_fixtures.py); the last
test asks transformers itself, when it is installed."""
import json
import os
import random

import pytest

from pipeline.bpe import GPT2_PAT
from pipeline.tokenizer import (
    BYTE_TO_CHAR,
    TokenizerLoadError,
    is_tiktoken_dir,
    load_tokenizer,
    mergeable_ranks,
    pretokenizer_pattern,
    token_bytes,
)

TESTS = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(TESTS, "fixtures", "models")
DEFAULT_MODEL = os.path.join(TESTS, "..", "models", "austen")

REFERENCED = sorted(n for n in os.listdir(FIXTURES)
                    if os.path.exists(os.path.join(FIXTURES, n, "tokenizer_reference.json")))
TIKTOKEN_FORMAT = sorted(n for n in os.listdir(FIXTURES)
                         if os.path.exists(os.path.join(FIXTURES, n, "tokenizer.tiktoken")))


def cases(name):
    with open(os.path.join(FIXTURES, name, "tokenizer_reference.json"), encoding="utf-8") as f:
        return json.load(f)["cases"]


def encode(enc, case):
    if case.get("special"):
        return enc.encode(case["text"], allowed_special="all")
    return enc.encode(case["text"])


def test_both_formats_are_covered():
    assert REFERENCED and TIKTOKEN_FORMAT
    # GPT-2's layout (<|endoftext|> last) and the tokenizers trainer's (<|endoftext|> first)
    eot_ids = {load_tokenizer(os.path.join(FIXTURES, n)).eot_token for n in REFERENCED}
    assert 0 in eot_ids and len(eot_ids) > 1


@pytest.mark.parametrize("name", REFERENCED)
def test_ids_match_transformers(name):
    enc = load_tokenizer(os.path.join(FIXTURES, name))
    mismatches = [(c["text"], encode(enc, c), c["ids"]) for c in cases(name)
                  if encode(enc, c) != c["ids"]]
    assert not mismatches


@pytest.mark.parametrize("name", REFERENCED)
def test_decode_round_trips(name):
    enc = load_tokenizer(os.path.join(FIXTURES, name))
    for c in cases(name):
        assert enc.decode(c["ids"]) == c["text"]
        assert b"".join(enc.decode_single_token_bytes(i) for i in c["ids"]) \
            == c["text"].encode("utf-8")


@pytest.mark.parametrize("name", REFERENCED)
def test_every_id_is_vocab_json_id(name):
    enc = load_tokenizer(os.path.join(FIXTURES, name))
    with open(os.path.join(FIXTURES, name, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    assert enc.n_vocab == len(vocab)
    for token, i in vocab.items():
        if token in enc.special_tokens_set:
            assert enc.encode_single_token(token) == i
        else:
            assert enc.decode_single_token_bytes(i) == token_bytes(token)


def test_byte_alphabet_is_gpt2s():
    assert BYTE_TO_CHAR[ord(" ")] == "Ġ" and BYTE_TO_CHAR[ord("\n")] == "Ċ"
    assert BYTE_TO_CHAR[ord("a")] == "a"
    assert len(set(BYTE_TO_CHAR.values())) == 256
    assert token_bytes("Ġthe") == b" the"


@pytest.mark.parametrize("name", REFERENCED[:1])
def test_tokenizer_json_alone_gives_the_same_ids(name, tmp_path):
    """The same vocabulary written as a tokenizer.json only (as Llama 3 ships it)."""
    src = os.path.join(FIXTURES, name)
    with open(os.path.join(src, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(src, "merges.txt"), encoding="utf-8") as f:
        merges = [line.split(" ") for line in f.read().splitlines()[1:] if line]
    eot = load_tokenizer(src).eot_token
    hf = {"normalizer": None,
          "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                            "trim_offsets": True, "use_regex": True},
          "added_tokens": [{"id": eot, "content": "<|endoftext|>", "special": True}],
          "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
    (tmp_path / "tokenizer.json").write_text(json.dumps(hf), encoding="utf-8")
    enc = load_tokenizer(str(tmp_path))
    for c in cases(name):
        assert encode(enc, c) == c["ids"]


@pytest.mark.parametrize("directory", [DEFAULT_MODEL] + [os.path.join(FIXTURES, n)
                                                         for n in sorted(os.listdir(FIXTURES))])
def test_ranks_and_pattern_are_the_loaded_tokenizers(directory):
    """What a BPE replay reads (pipeline.tokenizer.mergeable_ranks, pretokenizer_pattern) is what
    the Encoding holds (its private fields, read here only as the oracle)."""
    enc = load_tokenizer(directory)
    assert mergeable_ranks(enc) == enc._mergeable_ranks
    assert pretokenizer_pattern(directory) == enc._pat_str
    assert is_tiktoken_dir(directory) == os.path.exists(os.path.join(directory,
                                                                     "tokenizer.tiktoken"))


def test_pattern_of_a_split_regex_tokenizer_json(tmp_path):
    """A Llama 3 style tokenizer.json: the pattern is its Split regex, not GPT-2's."""
    src = os.path.join(FIXTURES, REFERENCED[0])
    with open(os.path.join(src, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(src, "merges.txt"), encoding="utf-8") as f:
        merges = [line.split(" ") for line in f.read().splitlines()[1:] if line]
    pat = r"\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+"
    hf = {"normalizer": None,
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated",
               "invert": False},
              {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
          "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
    (tmp_path / "tokenizer.json").write_text(json.dumps(hf), encoding="utf-8")
    assert load_tokenizer(str(tmp_path))._pat_str == pat == pretokenizer_pattern(str(tmp_path))
    assert pretokenizer_pattern(None) == GPT2_PAT and not is_tiktoken_dir(str(tmp_path))


@pytest.mark.parametrize("name", TIKTOKEN_FORMAT)
def test_tiktoken_format_fixtures_load(name):
    enc = load_tokenizer(os.path.join(FIXTURES, name))
    text = "It is a truth universally acknowledged, 1813 \u00e9\U0001F600\n"
    assert enc.decode(enc.encode(text)) == text


def test_default_model_tokenizer():
    enc = load_tokenizer(DEFAULT_MODEL)
    assert enc.n_vocab == 4096
    assert enc.encode("<|endoftext|>", allowed_special="all") == [4095]
    assert enc.eot_token == 4095
    text = ("It is a truth universally acknowledged, that a single man in possession of a good "
            "fortune, must be in want of a wife.\n\n  \"Mr. Darcy!\"\tcaf\u00e9 Stra\u00dfe "
            "1,000 \u4f60\u597d \U0001F468\u200D\U0001F469\u200D\U0001F467 ")
    ids = enc.encode(text)
    assert enc.decode(ids) == text
    assert max(ids) < 4095
    assert len(enc.encode(" the")) == 1                      # common words are single tokens


# ---- errors name the file ------------------------------------------------------------------------

def write_gpt2_style(directory, vocab, merges):
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n"
                                                                      for a, b in merges),
                                          encoding="utf-8")


def byte_vocab():
    return {c: b for b, c in BYTE_TO_CHAR.items()}


def test_a_good_hand_written_vocabulary_loads(tmp_path):
    vocab = byte_vocab() | {"ab": 256, "abĠ": 257, "<|endoftext|>": 258}
    write_gpt2_style(tmp_path, vocab, [("a", "b"), ("ab", "Ġ")])
    enc = load_tokenizer(str(tmp_path))
    assert enc.encode("ab ab") == [256, vocab["Ġ"], 256]     # " ab": "Ġ" + "ab", not "abĠ"
    assert enc.encode("ab abab") == [256, vocab["Ġ"], 256, 256]
    assert enc.eot_token == 258


def test_no_tokenizer_files(tmp_path):
    with pytest.raises(TokenizerLoadError, match="vocab.json"):
        load_tokenizer(str(tmp_path))
    with pytest.raises(TokenizerLoadError, match="not a directory"):
        load_tokenizer(str(tmp_path / "nowhere"))


@pytest.mark.parametrize("present, missing", [("vocab.json", "merges.txt"),
                                              ("merges.txt", "vocab.json"),
                                              ("tokenizer.tiktoken", "tiktoken_config.json"),
                                              ("tiktoken_config.json", "tokenizer.tiktoken")])
def test_missing_partner_file_is_named(tmp_path, present, missing):
    (tmp_path / present).write_text("{}")
    with pytest.raises(TokenizerLoadError, match=missing):
        load_tokenizer(str(tmp_path))


def test_garbled_vocab_json(tmp_path):
    (tmp_path / "vocab.json").write_text('{"a": 0, ')
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(TokenizerLoadError, match="vocab.json: not valid JSON"):
        load_tokenizer(str(tmp_path))


def test_garbled_merges_txt(tmp_path):
    write_gpt2_style(tmp_path, byte_vocab() | {"ab": 256}, [])
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b c\n")
    with pytest.raises(TokenizerLoadError, match=r"merges.txt, line 2"):
        load_tokenizer(str(tmp_path))


def test_merge_of_unknown_token(tmp_path):
    write_gpt2_style(tmp_path, byte_vocab() | {"ab": 256}, [("a", "b"), ("ab", "c")])
    with pytest.raises(TokenizerLoadError, match=r"merges.txt, line 3.*'abc' is not in"):
        load_tokenizer(str(tmp_path))


def test_missing_byte_token(tmp_path):
    vocab = byte_vocab()
    del vocab["Ġ"]
    write_gpt2_style(tmp_path, vocab, [])
    with pytest.raises(TokenizerLoadError, match=r"vocab.json.*'Ġ' \(byte 0x20\)"):
        load_tokenizer(str(tmp_path))


def test_garbled_tiktoken_ranks(tmp_path):
    (tmp_path / "tokenizer.tiktoken").write_text("YQ== 0\nnot-base64!! 1\n")
    (tmp_path / "tiktoken_config.json").write_text('{"pat_str": "\\\\w+", "special_tokens": {}}')
    with pytest.raises(TokenizerLoadError, match=r"tokenizer.tiktoken, line 2"):
        load_tokenizer(str(tmp_path))


def test_ids_out_of_merge_order_are_refused(tmp_path):
    """"a b" is the first merge but gets the higher id. tiktoken ranks pairs by id, so on "abc"
    with merges (a b) then (b c) it would merge "bc" first: [a, bc] instead of Hugging Face's
    [ab, c]. The loader must refuse rather than return other ids than the checkpoint's."""
    vocab = byte_vocab() | {"ab": 257, "bc": 256}
    write_gpt2_style(tmp_path, vocab, [("a", "b"), ("b", "c")])
    with pytest.raises(TokenizerLoadError, match=r"merges.txt, line 3.*ids rise"):
        load_tokenizer(str(tmp_path))


def test_two_merges_making_one_token_are_refused(tmp_path):
    vocab = byte_vocab() | {"ab": 256, "bc": 257, "abc": 258}
    write_gpt2_style(tmp_path, vocab, [("a", "b"), ("b", "c"), ("ab", "c"), ("a", "bc")])
    with pytest.raises(TokenizerLoadError, match=r"line 5.*already made"):
        load_tokenizer(str(tmp_path))


def test_unsupported_pre_tokenizer(tmp_path):
    write_gpt2_style(tmp_path, byte_vocab(), [])
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"normalizer": None, "pre_tokenizer": {"type": "Whitespace"}}))
    with pytest.raises(TokenizerLoadError, match="tokenizer.json: pre-tokenizer"):
        load_tokenizer(str(tmp_path))


# ---- live: transformers itself -------------------------------------------------------------------

PIECES = ["the", " the", "The", " Bennet", "Mr.", " wife", "'s", "'ll", "'VE", "don't", " ",
          "  ", "   ", "\n", "\n\n", "\t", " \t", "\r\n", "0", "12", " 345", "6789", "3.14",
          ",", "!", "?!", "...", "--", "\"", "(", ")", "\u2014", "\u201c", "\u2019",
          "caf\u00e9", " na\u00efve", "Stra\u00dfe", "e\u0301", "\u00c5", " \u00f8",
          "\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200D\U0001F469\u200D\U0001F467",
          "\U0001F3F3\ufe0f\u200D\U0001F308", "\u2764\ufe0f", "\u4f60\u597d", "\u4e16\u754c",
          "\u65e5\u672c", "\ud55c\uad6d", "\u041f\u0440\u0438", " \u043c\u0438\u0440",
          "\u03b1\u03b2", "\u0645\u0631", "\u05e9\u05dc", "\u0928\u092e", "\u00a0", "\u3000",
          "x", "y", "_", "@", "#", "\\", "/", "<", ">", "|"]


def random_texts(n, seed=0):
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 25))) for _ in range(n)]


def test_live_against_transformers():
    transformers = pytest.importorskip("transformers")
    for name in REFERENCED:
        hf = transformers.GPT2TokenizerFast.from_pretrained(os.path.join(FIXTURES, name))
        enc = load_tokenizer(os.path.join(FIXTURES, name))
        for text in random_texts(300, seed=len(name)):
            assert enc.encode(text) == hf(text, add_special_tokens=False)["input_ids"], text


def test_live_split_pattern_tokenizer_json(tmp_path):
    """A Llama 3 style tokenizer.json (Split regex, then ByteLevel without its own regex),
    trained here by the tokenizers library, read back as a tiktoken Encoding."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Regex, decoders, models, pre_tokenizers
    pat = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
           r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pat), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|begin_of_text|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(random_texts(400, seed=1), trainer=trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    enc = load_tokenizer(str(tmp_path))
    assert enc._pat_str == pat
    for text in random_texts(300, seed=2):
        assert enc.encode(text) == tok.encode(text).ids, text
        assert enc.decode(enc.encode(text)) == text


def test_an_id_past_the_tokenizer_is_named_not_raised_on():
    """The llama_untied fixture's model has more ids than its tokenizer (a padded vocabulary):
    sampling can emit one, and the page and the stream name it instead of failing."""
    from engine_support import get_model
    from pipeline.generation import TextStream
    from pipeline.tokenizer import id_bytes
    model = get_model("llama_untied")
    tok = model.tokenizer
    past = tok.n_vocab + 1
    assert past < model.config.vocab_size
    with pytest.raises(KeyError):
        tok.decode_single_token_bytes(past)
    assert id_bytes(tok, past) == f"<id {past}: no text>".encode()
    assert id_bytes(tok, 5) == tok.decode_single_token_bytes(5)
    stream = TextStream(tok)
    assert stream.push(past) == f"<id {past}: no text>"
