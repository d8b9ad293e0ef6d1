"""The decoding section shows real beam search, greedy and seeded samples of the running model:
the ranked beams and the tree's kept nodes are beam_search's, greedy is decode_loop, the
samples are the sampler's, the example prompt is the best of the openings by actually running
both; bad values are 4xx."""
import html
import json
import math
import re

import pytest

from pipeline.decoding import beam_search, continue_batch, sequence_logprobs
from pipeline.generation import decode_loop
from pipeline.sampling import SamplerSettings, greedy, sampler
from web.sections.decoding import EXAMPLE_NEW, EXAMPLE_WIDTH, OPENINGS
from web_support import error_message, table_rows, text_of, url

PROMPT = "Elizabeth could not help smiling at"


@pytest.mark.parametrize("width, new, alpha", [(3, 6, 1.0), (1, 5, 1.0), (5, 4, 0.0),
                                               (2, 7, 2.0)])
def test_final_beams_are_beam_searchs(client, model, width, new, alpha):
    r = client.get(url("/section/decoding", prompt=PROMPT, b_width=width, b_new=new,
                       b_alpha=alpha))
    assert r.status_code == 200
    page = text_of(r)
    ids = model.tokenizer.encode_ordinary(PROMPT)
    search = beam_search(model, ids, width, new, length_penalty=alpha)
    rows = table_rows(page, "Final beams", headers=True)
    assert len(rows) == len(search.final)
    for i, (row, h) in enumerate(zip(rows, search.final, strict=True)):
        assert row[:4] == [str(i + 1), model.tokenizer.decode(list(h.tokens)).strip(),
                           str(len(h.tokens)), f"{h.total:.3f}"]
        assert row[5] == f"{h.score:.3f}"
    kept = [n for n in search.nodes if n.status != "pruned"]
    tree = table_rows(page, "Kept proposals of the beam search", headers=True)
    assert [(int(r[0]), r[3], r[4], r[5]) for r in tree] == [
        (n.step + 1, f"{n.logprob:.3f}", f"{n.total:.3f}", n.status) for n in kept]
    figure = json.loads(html.unescape(re.search(
        r'<div class="plot" data-figure="([^"]*)" role="img"\s+aria-label="Tree', page).group(1)))
    # every proposal is drawn: pruned, kept and finished ones as their own dots, those ranked
    # below the plot's rows one dot per step that counts them (the "+N" beside it says so too)
    bottom = figure["data"][7]
    assert len(figure["data"][4]["x"]) + len(figure["data"][5]["x"]) + \
        len(figure["data"][6]["x"]) + sum(bottom["customdata"]) == len(search.nodes)
    assert len(bottom["x"]) == len(set(bottom["x"]))              # one dot per step at most
    plus = {x: int(t[1:]) for x, t in zip(figure["data"][-1].get("x", []),
                                          figure["data"][-1].get("text", []), strict=False)}
    assert dict(zip(bottom["x"], bottom["customdata"], strict=True)) == plus
    # every kept or finished proposal is a box on its node holding its total, the edges under it
    boxes = figure["layout"]["annotations"][1:]
    assert len(boxes) == len(kept)
    shown = [re.sub(r"<[^>]+>|\u202f", " ", b["text"]).split()[-1] for b in boxes]
    assert sorted(zip([b["x"] for b in boxes], shown, strict=True)) == \
        sorted((n.step, f"{n.total:.2f}") for n in kept)


def test_greedy_row_is_generate_and_width_one_agrees(client, model):
    page = text_of(client.get(url("/section/decoding", prompt=PROMPT, b_width=1, b_new=6,
                                  open="dec-beams")))
    ids = model.tokenizer.encode_ordinary(PROMPT)
    greedy = [p.token for p in decode_loop(model, ids, 6)]
    total = sum(sequence_logprobs(model, ids, greedy))
    rows = {r[0]: r[1:] for r in table_rows(page, "Greedy, best beam and samples", headers=True)}
    assert rows["greedy"][0] == model.tokenizer.decode(greedy).strip()
    assert math.isclose(float(rows["greedy"][2]), total, abs_tol=2e-3)
    assert rows["best beam"][0] == rows["greedy"][0]


def test_samples_use_the_sampling_sections_settings_and_seeds(client, model):
    q = dict(s_temp="1.3", s_topk="50", s_seed="12")
    page = text_of(client.get(url("/section/decoding", prompt=PROMPT, b_new=5, open="dec-beams",
                                  **q)))
    ids = model.tokenizer.encode_ordinary(PROMPT)
    # top-p and min-p at the sampling section's defaults
    s = SamplerSettings(temperature=1.3, top_k=50, top_p=0.9, min_p=0.05)
    rows = {r[0]: r[1:] for r in table_rows(page, "Greedy, best beam and samples", headers=True)}
    for seed in (12, 13, 14):
        tokens = [p.token for p in decode_loop(model, ids, 5, sample=sampler(s, seed))]
        assert rows[f"sample, seed {seed}"][0] == model.tokenizer.decode(tokens).strip()
        assert math.isclose(float(rows[f"sample, seed {seed}"][2]),
                            sum(sequence_logprobs(model, ids, tokens)), abs_tol=2e-3)


def test_example_is_the_opening_where_beam_gains_most(client, model):
    page = text_of(client.get(url("/section/decoding", prompt=PROMPT)))
    gains = {}
    for prompt in OPENINGS:
        ids = model.tokenizer.encode_ordinary(prompt)
        g = [p.token for p in decode_loop(model, ids, EXAMPLE_NEW)]
        g_total = sum(sequence_logprobs(model, ids, g))
        best = beam_search(model, ids, EXAMPLE_WIDTH, EXAMPLE_NEW, length_penalty=0).final[0]
        gains[prompt] = (best.total - g_total, g_total, best.total)
    prompt = max(gains, key=lambda p: gains[p][0])
    gain, g_total, b_total = gains[prompt]
    assert gain > 0            # there is a case where beam search beats greedy on this model
    note = html.unescape(re.sub(r"<[^>]+>", "", re.search(
        r'id="beam-example">(.*?)</p>', page, re.S).group(1)))
    note = " ".join(note.split())
    assert prompt in note
    assert f"greedy's total log-probability {g_total:.3f}" in note or \
        f"greedy's total log-probability {g_total + 0.001:.3f}" in note or \
        f"greedy's total log-probability {g_total - 0.001:.3f}" in note
    assert f"beam search's {b_total:.3f}" in note
    link = html.unescape(re.search(r'<a href="([^"]+)">Try it</a>', page).group(1))
    assert link.startswith("/?prompt=") and "b_alpha=0" in link


@pytest.mark.parametrize("name, value, status, words", [
    ("b_width", "9", 422, "Beam width must be between 1 and 8"),
    ("b_width", "0", 422, "Beam width"),
    ("b_width", "two", 400, "Beam width must be a whole number"),
    ("b_new", "13", 422, "New tokens must be between 1 and 12"),
    ("b_alpha", "-1", 422, "Length penalty"),
    ("b_alpha", "nan", 400, "Length penalty"),
])
def test_bad_values_are_4xx_with_the_message_at_the_control(client, name, value, status, words):
    r = client.get(url("/section/decoding", **{name: value}))
    assert r.status_code == status
    assert words in error_message(text_of(r), name)


def test_html_in_the_prompt_stays_text(client):
    page = text_of(client.get(url("/section/decoding", prompt="<b>bold</b> <script>x</script>")))
    assert "<script>x" not in page and "<b>bold" not in page


@pytest.mark.parametrize("n_prompt, shown", [(256, 1), (253, 4)])   # free positions + 1
def test_a_prompt_near_the_context_limit(client, model, n_prompt, shown):
    ids = model.tokenizer.encode_ordinary(" the" * 300)[:n_prompt]
    prompt = model.tokenizer.decode(ids)
    assert len(model.tokenizer.encode_ordinary(prompt)) == n_prompt
    r = client.get(url("/section/decoding", prompt=prompt, b_new=12))
    assert r.status_code == 200
    page = text_of(r)
    assert f"Only {shown} new token{'s' if shown != 1 else ''} fit" in page
    assert all(row[2] == str(shown) for row in table_rows(page, "Final beams", headers=True))


def test_beam_vs_greedy_verdict():
    from web.sections.decoding import VERDICTS, beam_vs_greedy
    assert beam_vs_greedy(True, 0.01) == "more likely" == VERDICTS[0]
    assert beam_vs_greedy(True, 0.0004) == beam_vs_greedy(True, -0.0004) == "the same"
    assert beam_vs_greedy(True, -0.01) == "less likely"
    assert beam_vs_greedy(False, 5.0) == "another length"


def test_samples_are_drawn_only_while_their_disclosure_is_open(client):
    """Closed, the samples' part asks for them when the disclosure opens, nothing is drawn and
    a sampling control does not ask this section for anything; open, they are there, and a
    sampling control fetches them again."""
    closed = text_of(client.get(url("/section/decoding", prompt=PROMPT), headers=HX_SAMPLES))
    assert 'id="dec-samples-wait"' in closed
    assert 'hx-trigger="toggle from:closest details"' in closed
    assert "sample, seed" not in closed and 'id="decoding-refresh"' not in closed
    opened = text_of(client.get(url("/section/decoding", prompt=PROMPT, open="dec-beams"),
                                headers=HX_SAMPLES))
    assert 'id="dec-samples-wait"' not in opened
    assert opened.count("sample, seed") == 3
    assert 'id="decoding-refresh"' in opened          # a sampling control refreshes them now


HX_SAMPLES = {"HX-Request": "true", "HX-Target": "decoding-samples"}


def test_a_sampling_control_names_the_event_the_samples_follow(client):
    """The server, not the page's scripts, knows who follows whom: a sampling control's answer names
    "sampling-changed" (after the swap), the samples' refresh element listens for exactly that,
    and answers that are not a control change of a followed section name nothing."""
    from web.core.registry import readers, refresh_trigger, section
    # the builds that read the sampler: decoding's samples, the generation loop's messages and
    # the chat's drawn answer follow it
    assert [s.id for s in readers(section("sampling"))] == ["decoding", "generation", "chat"]
    # and the overview's sampler controls (the same parameters) name "sampler-moved"
    assert refresh_trigger(section("decoding")) == \
        "sampling-changed from:body, sampler-moved from:body"
    assert refresh_trigger(section("tokenization")) == ""
    moved = client.get(url("/section/sampling", prompt=PROMPT, s_temp=0.5),
                       headers={"HX-Request": "true", "HX-Trigger": "s-temp"})
    assert moved.status_code == 200
    assert moved.headers["HX-Trigger"] == "sampling-changed"
    first_load = client.get(url("/section/sampling", prompt=PROMPT),
                            headers={"HX-Request": "true", "HX-Trigger": "sampling"})
    refused = client.get(url("/section/sampling", prompt=PROMPT, s_temp=-1),
                         headers={"HX-Request": "true", "HX-Trigger": "s-temp"})
    other = client.get(url("/section/tokenization", prompt=PROMPT, merges=3),
                       headers={"HX-Request": "true", "HX-Trigger": "merges"})
    assert refused.status_code == 422
    # the Sampling section following the overview's sampler: the readers were told already
    following = client.get(url("/section/sampling", prompt=PROMPT, s_temp=0.5),
                           headers={"HX-Request": "true", "HX-Trigger": "sampling-follow"})
    assert following.status_code == 200
    for r in (first_load, refused, other, following):
        assert "HX-Trigger" not in r.headers
    opened = text_of(client.get(url("/section/decoding", prompt=PROMPT, open="dec-beams"),
                                headers=HX_SAMPLES))
    assert 'hx-trigger="sampling-changed from:body, sampler-moved from:body"' in opened


def example_note(page: str) -> str:
    note = html.unescape(re.sub(r"<[^>]+>", "", re.search(
        r'id="beam-example">(.*?)</p>', page, re.S).group(1)))
    return " ".join(note.split())


def beam_stats(page: str) -> tuple:
    """(best beam's total, greedy's total) as the search's statement above the tree gives them,
    or None when it gives none ("the same": the two are one continuation)."""
    said = " ".join(html.unescape(re.sub(r"<[^>]+>", "", re.search(
        r'id="beam-vs-greedy">(.*?)</span>\s*</p>', page, re.S).group(1))).split())
    m = re.search(r"total log p (-?[\d.]+) against (-?[\d.]+)", said)
    return (float(m.group(1)), float(m.group(2))) if m else None


def test_smollm2_example_note_states_its_own_settings(smol_app):
    """SmolLM2's default prompt is its own example: the table above uses the model's defaults
    (4 new tokens, length penalty 1: beam and greedy tie), the example 6 tokens and no penalty.
    The note names its settings and says they are not the table's; at its settings the table
    and the note give the same totals."""
    from web.sections.decoding import beam_beats_greedy, openings
    lm = smol_app.extensions["explainer"].models["smollm2"]
    client = smol_app.test_client()
    prompt = "The capital of France is"
    ex_prompt, g_total, b_total, _ = beam_beats_greedy(lm.model, openings(lm))
    assert ex_prompt == prompt
    page = text_of(client.get(url("/section/decoding", model="smollm2", prompt=prompt)))
    note = example_note(page)
    assert (f"with beam width {EXAMPLE_WIDTH}, {EXAMPLE_NEW} new tokens and no length penalty"
            in note)
    assert f"greedy's total log-probability {g_total:.3f}, beam search's {b_total:.3f}" in note
    from web.sections.decoding import PARAMS
    width, n_new, alpha = (lm.default_of(p) for p in PARAMS)
    assert (width, n_new, alpha) != (EXAMPLE_WIDTH, EXAMPLE_NEW, 0)
    assert (f"These are not the settings above (beam width {width}, {n_new} new tokens, "
            f"length penalty {alpha:g})") in note
    link = html.unescape(re.search(r'<a href="([^"]+)">Use these settings</a>', page).group(1))
    # at the example's settings the table above and the note agree, and the note says nothing
    # about other settings
    assert link.startswith("/?")
    at_example = text_of(client.get("/section/decoding" + link.split("#")[0][1:]
                                    + "&model=smollm2"))
    stats = beam_stats(at_example)
    assert stats == (round(b_total, 3), round(g_total, 3))
    assert "not the settings above" not in example_note(at_example)


def test_a_longer_search_goes_on_from_the_kept_one_and_the_penalty_only_reranks(
        client, model, monkeypatch):
    """b_new one step further runs the steps the kept shorter search has not (one batch each),
    b_alpha runs none (the tree does not depend on the length penalty); every node and final
    beam is beam search's from the prompt."""
    from web.sections.decoding import _searches, cached_greedy, cached_search, tree_search

    def view(s):
        return ([(n.id, n.parent, n.token, n.logprob, n.total, n.status) for n in s.nodes],
                [(h.tokens, h.total, h.score, h.ended) for h in s.final])
    ids = tuple(model.tokenizer.encode_ordinary("Elizabeth looked at her sister, and then"))
    tree_search(model, ids, 3, 4)
    batches = []
    original = model.decode_batch
    monkeypatch.setattr(model, "decode_batch", lambda *a: batches.append(1) or original(*a))
    before = _searches.computed
    for alpha in (1.0, 0.0, 1.7):
        assert view(cached_search(model, ids, 3, 6, alpha)) == \
            view(beam_search(model, ids, 3, 6, length_penalty=alpha))
    assert _searches.computed == before + 1
    # from the 4-token search: the batch its last step did not run, and one for the 6th token;
    # each beam_search from the prompt beside it runs 5
    assert len(batches) == 2 + 3 * 5
    # greedy's line is the prompt's shared greedy run (web.model_state.greedy): one decode
    # step per token after the first, one more for a longer line
    steps = []
    decode = model.decode
    monkeypatch.setattr(model, "decode", lambda *a, **k: steps.append(1) or decode(*a, **k))
    greedy_6 = cached_greedy(model, ids, 6)
    assert len(steps) == 5 and cached_greedy(model, ids, 7).tokens[:6] == greedy_6.tokens
    assert len(steps) == 6                              # one more step
    real = continue_batch(model, ids, [greedy], 7)[0]
    assert cached_greedy(model, ids, 7) == real and len(steps) == 6
