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


# --- SentencePiece vocabularies: the replay merges by score ---------------------------------

SPM_PROMPTS = ["It is a truthful café, isn't it?", "  two  spaces\tand a tab"]


@pytest.fixture(scope="module")
def spm_apps(tmp_path_factory):
    """Apps on tiny GGUF checkpoints with a SentencePiece vocabulary (tests/gguf_support.py):
    Llama 2 style (a "▁" in front), Phi-3 (one before every segment), Gemma 2 (none)."""
    import json
    import os

    from app import create_app
    from gguf_support import TESTS_DIR, write_checkpoint
    from pipeline import load_model
    with open(os.path.join(TESTS_DIR, "fixtures", "gguf_reference.json"), encoding="utf-8") as f:
        seeds = {n: r["seed"] for n, r in json.load(f)["tiny"].items()}
    directory = tmp_path_factory.mktemp("gguf")
    out = {}
    for name in ("llama_spm_f32", "phi3_f32", "gemma2_f32"):
        m = load_model(write_checkpoint(str(directory / f"{name}.gguf"), name, seeds[name]))
        out[name] = m, create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False,
                                   "WARM_CACHES": False}).test_client()
    return out


def replay_part(page: str) -> str:
    return page.split('id="replay-h"', 1)[1].split('id="learn-h"', 1)[0]


@pytest.mark.parametrize("name", ["llama_spm_f32", "phi3_f32", "gemma2_f32"])
@pytest.mark.parametrize("prompt", SPM_PROMPTS)
def test_sentencepiece_replay_merges_by_score_and_ends_in_the_tokenizers_ids(spm_apps, name,
                                                                             prompt):
    """Every word of the prompt replayed: each caption's merge is the piece's score in the
    vocabulary, the highest of the adjacent pairs', the word of step 0 is its characters, the
    last step's chips are the tokenizer's own ids at that place, and the words' last steps
    joined are the tokenizer's ids for the whole prompt. No caption speaks of a rank."""
    model, client = spm_apps[name]
    tok = model.tokenizer
    joined = []
    first = text_of(client.get(url("/section/tokenization", prompt=prompt), headers=HX))
    words = re.findall(r'<option value="(\d+)"[^>]*>\d+: ', first.split('id="word-select"')[1]
                       .split("</select>")[0])
    assert len(words) >= 4                               # word by word: exact on these texts
    assert "No piece of this vocabulary spans two of this text's words" in first
    for w in range(len(words)):
        page = text_of(client.get(url("/section/tokenization", prompt=prompt, word=w),
                                  headers=HX))
        last = _last_step(page)
        steps = [replay_part(text_of(client.get(url("/section/tokenization", prompt=prompt,
                                                    word=w, step=s), headers=HX)))
                 for s in range(last + 1)]
        captions = [re.search(r'<p class="step-caption".*?</p>', p, re.S).group() for p in steps]
        assert not any("rank" in c for c in captions)
        for s, part in enumerate(steps[1:], start=1):
            m = re.search(r'Merged <q class="pair">(.*?)</q> \+ <q class="pair">(.*?)</q>\s*'
                          r"into piece (\d+), merged by score: (-?[\d.e+]+), the highest", part)
            assert m, s
            merged = int(m.group(3))
            assert tok.tokens[merged] == (m.group(1) + m.group(2)).replace("·", "\u2581")
            assert float(m.group(4)) == float(f"{tok.scores[merged]:g}")
        ids = chip_ids(steps[-1], "Pieces of the word at this step")
        assert 'class="check ok"' in steps[-1]
        joined += ids
    assert joined == tok.encode_ordinary(prompt)


def test_sentencepiece_replay_falls_back_to_bytes_and_says_so(spm_apps):
    model, client = spm_apps["llama_spm_f32"]
    tok = model.tokenizer
    assert "é" not in tok.vocab                          # the tiny vocabulary has no é
    prompt = "a theé"
    page = replay_part(text_of(client.get(url("/section/tokenization", prompt=prompt, word=1,
                                              step=99), headers=HX)))
    assert "Step 99 does not exist" in text_of(client.get(url(
        "/section/tokenization", prompt=prompt, word=1, step=99), headers=HX))
    last = _last_step(text_of(client.get(url("/section/tokenization", prompt=prompt, word=1),
                                         headers=HX)))
    page = replay_part(text_of(client.get(url("/section/tokenization", prompt=prompt, word=1,
                                              step=last), headers=HX)))
    assert 'becomes its UTF-8 bytes, one &lt;0xXX&gt; token each' in page
    ids = chip_ids(page, "Pieces of the word at this step")
    assert ids == tok.encode_ordinary(prompt)[-len(ids):]
    assert [tok.byte_ids[b] for b in "é".encode()] == ids[-2:]
    step0 = replay_part(text_of(client.get(url("/section/tokenization", prompt=prompt, word=1,
                                               step=0), headers=HX)))
    assert _last_step(step0) >= 2 and "no id" in step0    # é: a character without a piece


def test_the_byte_level_replay_says_rank_not_score(client):
    page = replay_part(text_of(client.get(url("/", prompt="hello", step=1))))
    assert "its rank" in page and "merged by score" not in page


def test_a_tokenizer_of_neither_kind_gets_a_sentence_not_a_replay(app, model):
    """The replay needs a byte-level BPE (a tiktoken Encoding) or a SentencePiece vocabulary;
    the section, rendered with the real context of another kind, says there is none."""
    from flask import render_template

    from web.core.params import PROMPT, parse_state
    from web.core.registry import SECTIONS
    from web.sections import tokenization
    assert tokenization.tokenizer_kind(model.tokenizer) == "byte-level"
    section = next(s for s in SECTIONS if s.id == "tokenization")
    lm = app.extensions["explainer"].models["austen"]
    with app.test_request_context("/"):
        state = parse_state(b"prompt=hello", [PROMPT, *section.params])
        ctx = tokenization.build(lm, state)
        assert ctx["replay_kind"] == "byte-level"
        ctx.update(tokenization.replay(type("Lm", (), {"tokenizer": object()})(), state,
                                       "hello"))
        assert ctx["replay_kind"] == "other"
        page = render_template(section.template, lm=lm, state=state, section=section, num=2,
                               **ctx)
    assert "is neither a byte-level BPE (merged by rank) nor a SentencePiece vocabulary" in \
        " ".join(page.split())
    assert "Pieces of the word at this step" not in page
