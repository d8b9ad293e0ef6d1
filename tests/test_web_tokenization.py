"""The tokenization section shows what the tokenizer and pipeline/bpe.py really produce."""
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.bpe import learn_bpe, pretokenize, segment
from web.model_state import encodings
from web.presentation.tokens import pieces, plain
from web.sections.tokenization import MAX_MERGES, token_counts_by_merges
from web_support import HX, chip_ids, chip_texts, table_rows, text_of, url

PROMPTS = [
    "It is a truth universally acknowledged",
    "Two  spaces,\ta tab,\nand a newline.\r\n",
    "Émile's café costs 12.50 € — naïve? 🦜🦜",
    "<img src=x onerror=alert(1)> & <script>alert(1)</script>",
    "<|endoftext|> is typed text here",
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_chip_ids_are_the_tokenizers_ids(client, model, prompt):
    r = client.get(url("/", prompt=prompt))
    assert r.status_code == 200
    page = text_of(r)
    # a browser sends a textarea's newlines as CRLF: the app reads them as LF
    ids = model.tokenizer.encode(prompt.replace("\r\n", "\n"), disallowed_special=())
    assert chip_ids(page, "Tokens of the prompt") == ids
    assert f"<strong>{len(ids)}</strong> tokens" in page


def test_chip_ids_equal_encode_for_an_ordinary_prompt(client, model):
    prompt = "Mr. Darcy walked\ninto the room."
    page = text_of(client.get(url("/", prompt=prompt)))
    assert chip_ids(page, "Tokens of the prompt") == model.tokenizer.encode(prompt)


def test_chips_show_whitespace_as_marks_and_give_back_the_prompt(client):
    prompt = "Two  spaces,\ta tab,\nand a newline."
    page = text_of(client.get(url("/", prompt=prompt)))
    assert '<span class="mark space" title="a space">·</span>' in page
    assert '<span class="mark newline" title="a newline">↵</span>' in page
    assert '<span class="mark tab" title="a tab">→</span>' in page
    assert "".join(chip_texts(page, "Tokens of the prompt")) == prompt


def test_a_split_character_is_shown_as_its_bytes(client, model):
    prompt = "a parrot 🦜"
    page = text_of(client.get(url("/", prompt=prompt)))
    byte_tokens = [i for i in model.tokenizer.encode(prompt)
                   if not _decodes(model.tokenizer.decode_single_token_bytes(i))]
    assert byte_tokens, "expected the emoji to be split into byte tokens"
    assert '<span class="mark byte"' in page and "&lt;0xF0&gt;" in page


def _decodes(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_pieces_marks_and_bytes():
    assert pieces(b" a\n\tb") == [("space", "·"), ("text", "a"), ("newline", "↵"),
                                  ("tab", "→"), ("text", "b")]
    assert pieces("🦜".encode()[:2]) == [("byte", "<0xF0>"), ("byte", "<0x9F>")]
    assert plain(b" x") == "·x"


def test_user_html_is_text_everywhere(client):
    evil = "<img src=x onerror=alert(1)> <script>alert(1)</script>"
    r = client.get(url("/", prompt=evil, bpe_text=evil + " " + evil, merges="10"))
    page = text_of(r)
    assert r.status_code == 200
    assert "<img src=x" not in page and "<script>alert" not in page
    assert "&lt;script&gt;" in page
    # Plotly labels (inside data-figure JSON) are HTML-escaped before they are attribute-escaped
    figures = re.findall(r'data-figure="([^"]*)"', page)
    assert figures and not any("<script" in f or "&lt;script" in f for f in figures)


def _last_step(page):
    return int(re.search(r"<strong>Step \d+ of (\d+)\.</strong>", page).group(1))


@pytest.mark.parametrize("prompt", ["Mr. Bingley's acknowledgement, unaccountably!",
                                    "naïve café 🦜 2024"])
def test_bpe_replay_ends_in_the_tokenizers_tokens_for_every_word(client, model, prompt):
    for i, word in enumerate(pretokenize(prompt)):
        first = text_of(client.get(url("/", prompt=prompt, word=i)))
        last = _last_step(first)
        page = text_of(client.get(url("/section/tokenization", prompt=prompt, word=i,
                                      step=last), headers=HX))
        assert chip_ids(page, "Pieces of the word at this step") == \
            model.tokenizer.encode(word), word
        assert 'class="check ok"' in page
        # and step 0 is the word's bytes
        assert len(chip_ids(first, "Pieces of the word at this step")) == \
            len(word.encode("utf-8"))


def test_bpe_replay_names_each_merge_and_its_rank(client, model):
    prompt = "hello"
    ranks_of = {model.tokenizer.decode_single_token_bytes(i): i for i in range(256, 4095)}
    page = text_of(client.get(url("/", prompt=prompt, step=1)))
    ids = chip_ids(page, "Pieces of the word at this step")
    merged = [i for i in ids if i >= 256]
    assert len(ids) == 4 and len(merged) == 1        # one merge done: 5 bytes -> 4 pieces
    m = re.search(r"Merged <q class=\"pair\">(.*?)</q> \+ <q class=\"pair\">(.*?)</q>\s*"
                  r"into token (\d+)", page)
    left, right, rank = m.group(1), m.group(2), int(m.group(3))
    assert rank == merged[0] == ranks_of[(left + right).encode()]


def test_default_word_is_the_longest(client):
    page = text_of(client.get(url("/", prompt="a tremendously long word")))
    assert re.search(r'<option value="1" selected>1: ·tremendously</option>', page)


TEXT = "a rat sat on a mat; the rats sat on the mats, and the cat that sat on the hat sat."


@pytest.mark.parametrize("n", [0, 1, 3, 12])
def test_learned_merges_are_learn_bpes(client, n):
    page = text_of(client.get(url("/", bpe_text=TEXT, merges=n)))
    expected = learn_bpe(TEXT, n)
    rows = table_rows(page, "Merges learned")
    if n == 0:
        assert rows == [["None yet: move the slider."]]
        return
    assert rows == [[str(m.rank), f"{plain(m.left)} + {plain(m.right)}", plain(m.merged),
                     str(m.count)] for m in expected]
    assert f"<strong>{256 + n}</strong> tokens (256 bytes + {n})" in page
    assert f"<strong>{len(segment(TEXT, expected))}</strong> tokens long" in page
    # the pair table shows the counts the trainer saw before the next merge
    nxt = learn_bpe(TEXT, n + 1, record_top=8)[n]
    assert table_rows(page, "Pair counts now") == [
        [f"{plain(a)} + {plain(b)}" + (" ← merged next" if k == 0 else ""), str(c)]
        for k, (a, b, c) in enumerate(nxt.top_pairs)]


def test_first_merge_counted_by_hand(client):
    # "low", " lower", " lowest": l+o and o+w occur 3 times each; the tie goes to the pair
    # whose bytes sort first, l+o. Then " "+"l" twice, "lo"+"w" 3 times ...
    page = text_of(client.get(url("/", bpe_text="low lower lowest", merges=1)))
    assert table_rows(page, "Merges learned") == [["256", "l + o", "lo", "3"]]


def test_learning_stops_when_no_pair_repeats(client):
    page = text_of(client.get(url("/", bpe_text="abab", merges=5)))
    assert "Training stopped after 1 merges" in page


def test_token_counts_by_merges_equal_segmenting_each_time():
    merges = learn_bpe(TEXT, MAX_MERGES)
    counts = token_counts_by_merges(TEXT, merges)
    assert counts == [len(segment(TEXT, merges[:k])) for k in range(len(merges) + 1)]


def test_other_encodings_are_counted_and_missing_ones_not_shown(app, client):
    lm = app.extensions["explainer"].default_model
    prompt = "It is a truth universally acknowledged"
    page = text_of(client.get(url("/", prompt=prompt)))
    for o in lm.other_encodings:
        if o.encoding is not None:
            n = len(o.encoding.encode(prompt))
            assert re.search(rf"<td>{o.name}.*?</td><td>[^<]*</td><td>{n}</td>", page), o.name
        else:
            assert f"<td>{o.name}" not in page
    # the learner never reads about the environment's trouble
    assert "Not shown:" not in page and "internet" not in page and "download" not in page
    assert ('id="deeper-tok-others"' in page) == any(o.encoding for o in lm.other_encodings)


def test_missing_encodings_are_one_warning_at_start_up(model, caplog, monkeypatch):
    import app as app_module
    gone = encodings.OtherEncoding("gone", "nobody", problem="not available on this machine")
    monkeypatch.setattr(encodings, "probe", lambda: (gone,))
    with caplog.at_level("WARNING"):
        app_module.create_app(dict(MODEL=model, WARM_CACHES=False))
    lines = [r.getMessage() for r in caplog.records if "other encodings" in r.getMessage()]
    assert lines == ["tokenization: other encodings not shown: gone: not available on this machine"]


def test_probe_never_hangs_and_never_raises(monkeypatch):
    def slow(name):
        time.sleep(3)
    monkeypatch.setattr(encodings.tiktoken, "get_encoding", slow)
    start = time.monotonic()
    found = encodings.probe((("slow", "nobody", ("slow",)),), 0.3)
    assert time.monotonic() - start < 1.5
    assert found[0].encoding is None and "within" in found[0].problem

    def fails(name):
        raise ConnectionError("offline")
    monkeypatch.setattr(encodings.tiktoken, "get_encoding", fails)
    found = encodings.probe((("gone", "nobody", ("gone",)),), 1.0)
    assert found[0].encoding is None and "not available" in found[0].problem


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60))
def test_any_text_is_tokens_or_a_clean_4xx(client, model, prompt):
    r = client.get(url("/section/tokenization", prompt=prompt.encode("utf-8", "surrogatepass")),
                   headers=HX)
    assert r.status_code in (200, 400, 422)
    if r.status_code == 200:
        norm = prompt.replace("\r\n", "\n")
        assert chip_ids(text_of(r), "Tokens of the prompt") == \
            model.tokenizer.encode_ordinary(norm)


def source_line(page: str) -> str:
    m = re.search(r'<p class="source">From the live tokenizer of(.*?)</p>', page, re.S)
    return " ".join(re.sub(r"<[^>]+>", "", m.group(1)).split())


def test_the_vocabulary_is_the_models_rows_and_added_bytes_are_said(client, model, smol_app):
    """The size written is the model's vocabulary (its embedding rows); single bytes that
    tiktoken needed and the file lacked are named as added, with their ids (SmolLM2: 21, ids
    49,152 to 49,172), never counted into the vocabulary silently."""
    said = source_line(text_of(client.get(url("/section/tokenization", prompt="Hi"), headers=HX)))
    assert f"{model.config.vocab_size:,} tokens, run by tiktoken" in said
    assert model.tokenizer.n_vocab == model.config.vocab_size and "added here" not in said
    lm = smol_app.extensions["explainer"].models["smollm2"]
    said = source_line(text_of(smol_app.test_client().get(
        url("/section/tokenization", model="smollm2", prompt="Hi"), headers=HX)))
    rows = lm.model.config.vocab_size
    added = sorted(i for i in lm.tokenizer._mergeable_ranks.values() if i >= rows)
    assert (rows, len(added), lm.tokenizer.n_vocab) == (49152, 21, 49173)
    assert added == list(range(rows, rows + len(added)))
    assert "49,152 tokens, run by tiktoken" in said and "49,173 tokens" not in said
    assert ("the model's file has none for 21 of them: they were added here as ids 49,152 to "
            "49,172 (49,173 ids in all)") in said
