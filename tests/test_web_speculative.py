"""The speculative-decoding section: its numbers are the pipeline's (rerun here with the same
seed), greedy mode shows the target's own greedy text, the predicted speed-up is the measured run
priced from the cost table, bad values are 4xx with messages, state round-trips through the URL, and
a
missing or mismatched draft model gives a clear message."""
import html
import json
import os
import re

import numpy as np
import pytest

from pipeline import load_model
from pipeline.generation import decode_loop
from pipeline.speculative import speculative_generate
from web_support import HX, MARKS, error_message, every_section, text_of, url, without_definitions


def marks_to_text(inner: str) -> str:
    """Text shown with whitespace marks, as the characters it stands for."""
    text = html.unescape(re.sub(r"<[^>]+>", "", inner))
    return "".join(MARKS.get(ch, ch) for ch in text)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRAFT_DIR = os.path.join(ROOT, "models", "austen-draft")


@pytest.fixture(scope="module")
def draft():
    return load_model(DRAFT_DIR)


def cell(page: str, cell_id: str) -> str:
    m = re.search(r'<td id="%s">(.*?)</td>' % cell_id, page, re.S)
    assert m, cell_id
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip()


def rounds_shown(page: str) -> list:
    """[(accepted, proposed)] per round, from the rounds' list labels."""
    return [(int(a), int(p)) for a, p in
            re.findall(r'aria-label="Round \d+: (\d+) of (\d+) accepted"', page)]


@pytest.mark.parametrize("mode,gamma,tokens,seed", [("sample", 4, 16, 0), ("sample", 2, 20, 7),
                                                    ("greedy", 3, 12, 0)])
def test_numbers_are_the_pipelines(client, model, draft, mode, gamma, tokens, seed):
    prompt = "Elizabeth walked to Netherfield"
    page = text_of(client.get(url("/section/speculative", prompt=prompt, sp_mode=mode,
                                  sp_gamma=gamma, sp_tokens=tokens, sp_seed=seed), headers=HX))
    ids = model.tokenizer.encode_ordinary(prompt)
    run = speculative_generate(model, draft, ids, tokens, gamma,
                               temperature=1.0 if mode == "sample" else 0.0,
                               rng=np.random.default_rng(seed))
    assert cell(page, "sp-acceptance") == f"{run.acceptance_rate:.3f}"
    assert cell(page, "sp-tokens-per-pass") == f"{run.tokens_per_pass:.2f}"
    assert rounds_shown(page) == [(r.n_accepted, len(r.proposals)) for r in run.rounds]
    m = re.search(r'aria-label="Speculative text">(.*?)</p>', page, re.S)
    shown = marks_to_text(m.group(1))
    assert shown == model.tokenizer.decode(run.tokens)


def figure_steps(page: str) -> dict:
    """{k: the label of the pass figure's bar over k tokens} ("1 step", "2.35 steps")."""
    figures = [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]+)"', page)]
    bars = next(f for f in figures
                if f["layout"]["xaxis"]["title"]["text"] == "tokens read in one pass")
    trace = bars["data"][0]
    return {int(x): t for x, t in zip(trace["x"], trace["text"], strict=True)}


def test_the_prediction_is_the_measured_run_priced_from_the_cost_table(client, app):
    """One prediction: the reference run's passes (each over the tokens it read) and draft steps
    priced in decode steps from the cost table; the figure's passes are the same table's, so the
    mean pass is the mean of the figure's bars over the run's pass sizes."""
    from pipeline.costs import price_speculative
    from web.model_state.measured import cost_table
    from web.sections.speculative import speed_table
    lm = app.extensions["explainer"].default_model
    for mode, gamma in (("sample", 5), ("greedy", 2)):
        page = text_of(client.get(url("/section/speculative", sp_gamma=gamma, sp_mode=mode),
                                  headers=HX))
        table = cost_table(lm)
        ref = speed_table(lm).modes[mode].rows[gamma - 1]
        priced = price_speculative(table, ref.pass_sizes, ref.n_tokens, ref.draft_steps)
        assert max(ref.pass_sizes) <= gamma + 1 and len(ref.pass_sizes) >= 1
        assert priced.speedup == pytest.approx(
            ref.n_tokens / (sum(table.verify[k].median for k in ref.pass_sizes) / table.step
                            + ref.draft_steps * table.draft_decode.median / table.step))
        assert cell(page, "sp-expected") == f"{priced.speedup:.2f}×"
        assert cell(page, "sp-mean-pass") == f"{priced.mean_pass_steps:.2f} steps"
        assert cell(page, "sp-cost-ratio") == f"{table.draft_ratio:.3f}"
        assert cell(page, "sp-verify") == f"{table.verify[gamma + 1].shown} ms"
        labels = figure_steps(page)
        assert labels[1] == "1 step"
        assert all(labels[k] == f"{table.verify_steps(k):.2f} steps" for k in labels if k > 1)
        assert priced.mean_pass_steps == pytest.approx(
            sum(table.verify_steps(k) for k in ref.pass_sizes) / len(ref.pass_sizes))
        # the headline's prediction is the table's, with the word that fits it
        predicted = re.search(r'id="sp-predicted">(.*?)</strong>', page).group(1)
        assert predicted == (f"{priced.speedup:.2f}×: "
                             f"{'faster' if priced.speedup >= 1 else 'slower'}")


def test_greedy_is_the_targets_greedy_text(client, model):
    prompt = "It is a truth universally acknowledged"
    page = text_of(client.get(url("/section/speculative", prompt=prompt, sp_mode="greedy",
                                  sp_tokens=30), headers=HX))
    assert "Token for token the target" in page
    m = re.search(r'aria-label="Target alone text">(.*?)</p>', page, re.S)
    shown = marks_to_text(m.group(1))
    ids = model.tokenizer.encode_ordinary(prompt)
    assert shown == model.tokenizer.decode([p.token for p in decode_loop(model, ids, 30)])


def test_austen_keeps_its_draft_model(client):
    page = text_of(client.get(url("/section/speculative", open="spec-rule"), headers=HX))
    assert "sp-lookup-why" not in page and "sp-found" not in page
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", page)))
    assert "The draft austen-draft (" in text and "prompt lookup" not in text


def test_outcome_of_every_chip(client, model, draft):
    page = html.unescape(text_of(client.get(url("/section/speculative", sp_seed=3), headers=HX)))
    ids = model.tokenizer.encode_ordinary(
        "It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a")
    from web.sections.speculative import PARAMS
    n_tokens = next(p.default for p in PARAMS if p.name == "sp_tokens")
    run = speculative_generate(model, draft, ids, n_tokens, 4, 1.0, np.random.default_rng(3))
    titles = re.findall(r'<li class="chip sp (\w+)"\s+title="([^"]*)"', page)
    expected = []
    for r in run.rounds:
        for p in r.proposals:
            expected.append(("acc" if p.accepted else "rej",
                             f"q = {p.q:.4g}, p = {p.p:.4g}, min(1, p/q) = "
                             f"{min(1, p.p / p.q):.3f}, u = {p.u:.3f}: "
                             f"{'accepted' if p.accepted else 'rejected'}"))
        expected.append(("own", f"nothing proposed: the target's own token (p = {r.p:.4g})")
                        if not r.proposals else
                        ("res" if r.kind == "resampled" else "bonus",
                         f"{r.kind} by the target (p = {r.p:.4g})"))
    assert titles == expected
    # under each chip: the probabilities in % with one decimal, "<0.1%" below 0.05%
    def pct(x):
        return "<0.1%" if x < 0.0005 else f"{100 * x:.1f}%"
    shown = [html.unescape(re.sub(r"\s+", " ", t)).strip()
             for t in re.findall(r'<span class="tid">(.*?)</span>', page, re.S)]
    chips = []
    for r in run.rounds:
        chips += [f"q {pct(p.q)} · p {pct(p.p)}" for p in r.proposals]
        chips.append(f"{r.kind if r.proposals else 'own'} · p {pct(r.p)}")
    assert shown[-len(chips):] == chips


BAD = [
    ({"sp_mode": "beam"}, "sp_mode", 422, "Decoding must be one of sample, greedy; got 'beam'."),
    ({"sp_gamma": "0"}, "sp_gamma", 422,
     "Draft tokens per round (γ) must be between 1 and 8; got 0."),
    ({"sp_gamma": "9"}, "sp_gamma", 422,
     "Draft tokens per round (γ) must be between 1 and 8; got 9."),
    ({"sp_gamma": "2.5"}, "sp_gamma", 400, "Draft tokens per round (γ) must be a whole number"),
    ({"sp_tokens": "3"}, "sp_tokens", 422, "New tokens must be between 4 and 48; got 3."),
    ({"sp_tokens": "100000"}, "sp_tokens", 422, "New tokens must be between 4 and 48"),
    ({"sp_seed": "-1"}, "sp_seed", 422, "Seed must be between 0 and 9999; got -1."),
    ({"sp_seed": ""}, "sp_seed", 400, "Seed must be a whole number, not ''."),
]


@pytest.mark.parametrize("query,name,status,message", BAD)
def test_bad_values_get_a_message_next_to_their_control(client, query, name, status, message):
    for path, headers in (("/", {}), ("/section/speculative", HX)):
        r = client.get(url(path, **query),
                       headers={**headers, **every_section()} if headers else every_section())
        assert r.status_code == status
        assert error_message(text_of(r), name).startswith(message)


def test_state_round_trips_through_the_url(client):
    q = {"sp_mode": "greedy", "sp_gamma": "6", "sp_tokens": "20", "sp_seed": "12"}
    r = client.get(url("/section/speculative", **q), headers=every_section())
    assert r.headers["HX-Push-Url"] == "/?sp_mode=greedy&sp_gamma=6&sp_tokens=20&sp_seed=12"
    page = text_of(client.get(r.headers["HX-Push-Url"], headers=every_section()))
    assert '<option value="greedy" selected>' in page
    assert re.search(r'id="sp-gamma"[^>]*value="6"', page)
    assert re.search(r'id="sp-tokens"[^>]*value="20"', page)
    assert re.search(r'id="sp-seed"[^>]*value="12"', page)


# --- the draft model: loaded once at start, or a clear message ---------------------------------

def test_default_app_loads_the_sibling_draft(app):
    lm = app.extensions["explainer"].default_model
    assert lm.draft is not None and os.path.samefile(lm.draft.path, DRAFT_DIR)
    assert lm.draft_problem == ""


NO_DRAFT = ("Here the draft is no model but prompt lookup: the last 3 tokens (else 2, else 1) are "
            "looked up earlier in the prompt and the text so far")


def test_missing_draft_is_told_to_the_operator_and_learners_get_prompt_lookup(model, caplog):
    from app import create_app
    with caplog.at_level("WARNING"):
        app = create_app({"MODEL": model, "TESTING": True, "WARM_CACHES": False,
                          "DRAFT_MODEL_PATH": os.path.join(ROOT, "models", "nowhere")})
    assert "the draft model did not load:" in caplog.text
    assert "nowhere: no such model directory" in caplog.text
    r = app.test_client().get("/section/speculative", headers=HX)
    assert r.status_code == 200
    text = plain_text(text_of(r))
    assert NO_DRAFT in text and "nowhere" not in text


def test_a_draft_with_another_tokenizer_is_told_to_the_operator(model, caplog):
    from app import create_app
    with caplog.at_level("WARNING"):
        app = create_app({"MODEL": model, "TESTING": True, "WARM_CACHES": False,
                          "DRAFT_MODEL_PATH": os.path.join(ROOT,
                                                           "tests/fixtures/models/llama_mha")})
    assert ("the draft model cannot serve this model: the draft's vocabulary has 320 tokens, "
            "the target's 4,096") in caplog.text
    text = plain_text(text_of(app.test_client().get("/section/speculative", headers=HX)))
    assert NO_DRAFT in text and "vocabulary" not in text


def test_help_lists_the_draft_model_option():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "app.py", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120).stdout
    assert "--draft-model" in out and "LLM_EXPLAINER_DRAFT_MODEL" in out


def test_headline_says_faster_or_slower_as_measured(app, client):
    """The core's sentence about speed agrees with the measurement shown in the table: the same
    ratio (never its inverse) and the word that fits it."""
    from web.sections.speculative import speed_table
    lm = app.extensions["explainer"].default_model
    for mode, gamma in (("sample", 4), ("greedy", 2)):
        page = text_of(client.get(url("/section/speculative", sp_mode=mode, sp_gamma=gamma),
                                  headers=HX))
        speed = speed_table(lm).modes[mode]
        ref = speed.rows[gamma - 1]
        speedup = (speed.alone_seconds / speed.n_alone) / (ref.seconds / ref.n_tokens)
        assert cell(page, "sp-speedup") == f"{speedup:.2f}×"
        m = re.search(r'<p class="stats" id="sp-headline">(.*?)</p>', page, re.S)
        text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", m.group(1))))
        word = "faster" if speedup >= 1 else "slower"
        assert f"{speedup:.2f}×: {word} than the target alone." in text
        assert f"{1 / speedup:.2f}× faster" not in text and f"{1 / speedup:.2f}× slower" not in text
        # the acceptance beside the timing is the reference text's, and says so
        assert f"where {100 * ref.acceptance:.0f}% of guesses were accepted" in text


def test_disclosure_open_from_the_url(client):
    opened = r'<details class="deeper" id="deeper-spec-rule"[^>]*\bopen\b'
    assert not re.search(opened, text_of(client.get("/section/speculative", headers=HX)))
    page = text_of(client.get(url("/section/speculative", open="spec-rule"), headers=HX))
    assert re.search(opened, page)


# --- SmolLM2: no draft model, prompt lookup ----------------------------------------------------

@pytest.fixture()
def smol(smol_app):
    """(test client, SmolLM2's LoadedModel), inside the app's context (its caches)."""
    with smol_app.app_context():
        yield smol_app.test_client(), smol_app.extensions["explainer"].models["smollm2"]


def plain_text(page: str) -> str:
    """The text as it reads: no markup, no glossary definitions."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", without_definitions(page))))



SMOL_PROMPT = "x = 1\ny = 2\nprint(x)\nprint(y)\nx = 3\ny = 4\nprint("


@pytest.mark.parametrize("mode,gamma,tokens,seed", [("greedy", 4, 10, 0), ("sample", 3, 8, 5)])
def test_smollm2_numbers_are_the_pipelines_prompt_lookup(smol, mode, gamma, tokens, seed):
    from pipeline.speculative import NgramDraft
    client, lm = smol
    assert lm.draft is None
    page = text_of(client.get(url("/section/speculative", model="smollm2", prompt=SMOL_PROMPT,
                                  sp_mode=mode, sp_gamma=gamma, sp_tokens=tokens, sp_seed=seed,
                                  open="spec-rule"), headers=HX))
    model = lm.model
    ids = model.tokenizer.encode_ordinary(SMOL_PROMPT)
    run = speculative_generate(model, NgramDraft(), ids, tokens, gamma,
                               temperature=1.0 if mode == "sample" else 0.0,
                               rng=np.random.default_rng(seed))
    assert run.proposed > 0
    assert cell(page, "sp-acceptance") == f"{run.acceptance_rate:.3f}"
    assert cell(page, "sp-tokens-per-pass") == f"{run.tokens_per_pass:.2f}"
    assert rounds_shown(page) == [(r.n_accepted, len(r.proposals)) for r in run.rounds]
    shown = marks_to_text(re.search(r'aria-label="Speculative text">(.*?)</p>', page,
                                    re.S).group(1))
    assert shown == model.tokenizer.decode(run.tokens)
    # every proposal with q = 1 and the target's p; what lookup found, and where
    titles = re.findall(r'<li class="chip sp (\w+)"\s+title="([^"]*)"', html.unescape(page))
    expected = []
    for r in run.rounds:
        for p in r.proposals:
            expected.append(("acc" if p.accepted else "rej",
                             f"q = 1, p = {p.p:.4g}, min(1, p/q) = {min(1, p.p):.3f}, "
                             f"u = {p.u:.3f}: {'accepted' if p.accepted else 'rejected'}"))
        expected.append(("own", f"nothing proposed: the target's own token (p = {r.p:.4g})")
                        if not r.proposals else
                        ("res" if r.kind == "resampled" else "bonus",
                         f"{r.kind} by the target (p = {r.p:.4g})"))
    assert titles == expected
    found = [plain_text(f).strip() for f in
             re.findall(r'<span class="sp-found">(.*?)</span>', page, re.S)]
    assert [f.startswith("nothing found") for f in found] == [r.lookup.n == 0
                                                             for r in run.rounds]
    for f, r in zip(found, run.rounds, strict=True):
        if r.lookup.n:
            assert f.endswith(f"({r.lookup.n} token{'s' if r.lookup.n > 1 else ''}) "
                              f"at {r.lookup.at}")
    if mode == "greedy":
        assert "Token for token the target's own greedy text." in page


def test_smollm2_says_what_the_draft_is_and_why_no_model(smol):
    client, lm = smol
    page = plain_text(text_of(client.get(url("/section/speculative", model="smollm2",
                                             open="spec-rule"), headers=HX)))
    austen = next(m for m in client.application.extensions["explainer"].models.values()
                  if m.draft is not None)
    assert "Here the draft is no model but prompt lookup" in page
    assert (f"the {austen.name} model's draft, austen-draft, reads a vocabulary of "
            f"{austen.draft.config.vocab_size:,} tokens, SmolLM2-135M-Instruct one of "
            f"{lm.model.config.vocab_size:,}") in page
    assert (f"the draft's vocabulary has {austen.draft.config.vocab_size:,} tokens, the "
            f"target's {lm.model.config.vocab_size:,}") in page
    ids = lm.tokenizer.encode_ordinary("Elizabeth")
    assert f"“Elizabeth” is {', '.join(map(str, ids))} to SmolLM2-135M-Instruct" in page


def test_smollm2_measurements_are_the_ones_shown(smol):
    """The times on screen are the cost table's (step, pass) and lookup_speed's (its run); the
    prediction is that run priced from the table, the measured speed-up the run's own."""
    from pipeline.costs import price_speculative
    from web.model_state.measured import cost_table
    from web.sections.speculative import LOOKUP_GAMMA, LOOKUP_TEXT, LOOKUP_TOKENS, lookup_speed
    client, lm = smol
    page = text_of(client.get(url("/section/speculative", model="smollm2", prompt=SMOL_PROMPT,
                                  open="spec-rule"), headers=HX))
    sp, table = lookup_speed(lm), cost_table(lm)
    assert sp.same_text                                # greedy: the target's own tokens
    assert sp.n_tokens == sp.n_alone == LOOKUP_TOKENS and sp.proposed > 0
    assert cell(page, "sp-step") == f"{table.decode_at(table.pass_context).shown} ms"
    assert cell(page, "sp-verify") == f"{table.verify[LOOKUP_GAMMA + 1].shown} ms"
    priced = price_speculative(table, sp.pass_sizes, sp.n_tokens, 0, c=0.0,
                               other_seconds=sp.lookup_s)
    assert priced.other_steps < 0.05 * priced.steps     # a lookup is no model pass
    assert cell(page, "sp-cost-ratio") == f"{priced.other_steps:.3f} steps"
    assert cell(page, "sp-speedup") == f"{sp.speedup:.2f}×"
    assert cell(page, "sp-expected") == f"{priced.speedup:.2f}×"
    assert cell(page, "sp-mean-pass") == f"{priced.mean_pass_steps:.2f} steps"
    text = plain_text(page)
    word = "faster" if sp.speedup >= 1 else "slower"
    assert (f"γ = {LOOKUP_GAMMA}, greedy): {sp.speedup:.2f}×: {word} than the target alone. "
            f"Priced from the cost table, the same run predicts {priced.speedup:.2f}×") in text
    assert (f"a pass averaged {sp.tokens_per_pass:.2f} tokens and cost "
            f"{priced.mean_pass_steps:.2f} decode steps") in text
    assert (f"{sp.tokens_per_pass:.2f} / {priced.mean_pass_steps:.2f} = "
            f"{sp.tokens_per_pass / priced.mean_pass_steps:.2f}") in text
    assert html.escape(LOOKUP_TEXT, quote=False) in page   # the text measured is shown
    # measured once: a second prompt shows the same measurement
    other = text_of(client.get(url("/section/speculative", model="smollm2",
                                   prompt="The capital of France is", open="spec-rule"),
                               headers=HX))
    assert cell(other, "sp-speedup") == cell(page, "sp-speedup")
    assert cell(other, "sp-expected") == cell(page, "sp-expected")


def test_smollm2_prompt_without_repetition(smol):
    """Nothing to look up: every round is a plain step, said as such, and a is not made up."""
    client, lm = smol
    page = text_of(client.get(url("/section/speculative", model="smollm2", prompt="Hi",
                                  sp_tokens=4, sp_mode="greedy", open="spec-rule"),
                              headers=HX))
    assert r'<span class="sp-found">' in page
    ids = lm.tokenizer.encode_ordinary("Hi")
    from pipeline.speculative import NgramDraft
    run = speculative_generate(lm.model, NgramDraft(), ids, 4, 4, 0.0, np.random.default_rng(0))
    if run.proposed == 0:
        assert cell(page, "sp-acceptance") == "no proposals"
        assert "expects" not in plain_text(page).split("tokens per target pass", 2)[1]


def test_the_target_step_is_the_cost_tables_with_the_runs_own_beside_it(client, app):
    """The unit is the cost table's decode step (the one every section quotes); the target
    alone's own mean step in the measured run is shown beside it, with why they differ."""
    from web.model_state.measured import cost_table
    from web.sections.speculative import speed_table
    lm = app.extensions["explainer"].default_model
    if lm.draft is None:
        pytest.skip("the default model has no draft model here")
    page = text_of(client.get(url("/section/speculative", prompt="Mr. Darcy", open="spec-rule"),
                              headers=HX))
    table = cost_table(lm)
    step = table.decode_at(table.pass_context)
    assert cell(page, "sp-step") == f"{step.shown} ms"
    own = speed_table(lm).modes["sample"].target_step
    text = plain_text(page)
    assert (f"one decode step at {table.pass_context} tokens, from the cost table: "
            f"{step.shown} ms ({step.how()}). The target alone's own steps in the measured run "
            f"averaged") in text
    shown = re.search(r'id="sp-alone-step">([\d.]+) ms<', page).group(1)
    assert float(shown) == pytest.approx(1000 * own, abs=0.051)
    assert ("more, because each also draws its token" if own > step.seconds
            else "no more: the draw after each step") in text



def test_the_target_alone_runs_only_where_it_is_shown(client, model, monkeypatch):
    """Sampling mode shows the target-alone text only in the spec-rule disclosure: closed, it is
    not run and a note asks for it when the disclosure opens; open (or in greedy mode, whose core
    checks it), it is the target's own sampled text."""
    from pipeline.decoding import continue_batch
    from web.sections import speculative as section
    prompt = "Elizabeth walked to Meryton with"
    ran = []
    original = section.alone_run
    monkeypatch.setattr(section, "alone_run", lambda *a: ran.append(a) or original(*a))
    closed = text_of(client.get(url("/section/speculative", prompt=prompt, sp_seed=7),
                                headers=HX))
    assert ran == [] and 'id="sp-alone-wait"' in closed
    assert 'hx-trigger="toggle from:closest details"' in closed
    assert 'aria-label="Target alone text"' not in closed
    opened = text_of(client.get(url("/section/speculative", prompt=prompt, sp_seed=7,
                                    open="spec-rule"), headers=HX))
    assert len(ran) == 1 and 'id="sp-alone-wait"' not in opened
    ids = model.tokenizer.encode_ordinary(prompt)
    rng, probs = np.random.default_rng(7), section.distribution_at(1.0)
    want = continue_batch(model, ids, [lambda logits, _: section.draw(probs(logits), rng)],
                          12)[0].tokens
    m = re.search(r'aria-label="Target alone text">(.*?)</p>', opened, re.S)
    assert marks_to_text(m.group(1)) == model.tokenizer.decode(want)


def test_smollm2_sampled_runs_its_big_models_length_and_says_so(smol):
    """Sampled, each round of a big model is a pass computed when asked: the run makes
    BIG_SAMPLED_TOKENS new tokens (the page says how many of those asked), the target alone
    beside it as many; greedy runs read the greedy run and make every length asked."""
    from pipeline.speculative import NgramDraft
    from web.sections.speculative import BIG_SAMPLED_TOKENS
    client, lm = smol
    ids = lm.model.tokenizer.encode_ordinary(SMOL_PROMPT)
    asked = BIG_SAMPLED_TOKENS + 12
    page = text_of(client.get(url("/section/speculative", model="smollm2", prompt=SMOL_PROMPT,
                                  sp_mode="sample", sp_gamma=3, sp_tokens=asked, sp_seed=5,
                                  open="spec-rule"), headers=HX))
    run = speculative_generate(lm.model, NgramDraft(), ids, BIG_SAMPLED_TOKENS, 3, 1.0,
                               np.random.default_rng(5))
    assert len(run.tokens) == BIG_SAMPLED_TOKENS
    assert rounds_shown(page) == [(r.n_accepted, len(r.proposals)) for r in run.rounds]
    cap = plain_text(re.search(r'<span id="sp-sampled-cap">(.*?)</span>', page, re.S).group(1))
    assert f"runs {BIG_SAMPLED_TOKENS} new tokens here, not {asked}" in cap
    assert f"{lm.model.n_params():,} parameters" in cap
    alone = re.search(r'aria-label="Target alone text">(.*?)</p>', page, re.S).group(1)
    assert len(re.findall(r"<span>", alone)) == BIG_SAMPLED_TOKENS
    greedy = text_of(client.get(url("/section/speculative", model="smollm2",
                                    prompt=SMOL_PROMPT, sp_mode="greedy", sp_gamma=3,
                                    sp_tokens=asked), headers=HX))
    assert 'id="sp-sampled-cap"' not in greedy
    run = speculative_generate(lm.model, NgramDraft(), ids, asked, 3, 0.0)
    assert rounds_shown(greedy) == [(r.n_accepted, len(r.proposals)) for r in run.rounds]
