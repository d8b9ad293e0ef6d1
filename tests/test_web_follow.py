"""A control's answer brings the places that follow it (web/core/views.py follow): the page names
them (X-Follows, static/requests.js), and the answer carries each follower's part out of band,
the same part the follower's own request returns; without the header it names the event the
followers listen for, and they ask for themselves."""
import re

from web_support import table_rows, text_of, url

PROMPT = "Elizabeth could not help smiling at"
HX = {"HX-Request": "true"}
FOLLOWS = "decoding-samples,overview-live,sampling-distribution,tokenization-chips,Bad target!"
SAMPLES = "Greedy, best beam and samples"


def oob_parts(page: str) -> dict:
    """{target id: inner HTML} of the answer's out-of-band part wrappers (each runs to the next
    out-of-band element or the end of the answer)."""
    starts = [m for m in re.finditer(r'<div hx-swap-oob="innerHTML:#([\w-]+)">', page)]
    ends = [m.start() for m in re.finditer(r'<div[^>]*hx-swap-oob=', page)] + [len(page)]
    parts = {}
    for m in starts:
        end = min(e for e in ends if e > m.start())
        inner = page[m.end():end].rstrip()
        assert inner.endswith("</div>")
        parts[m.group(1)] = inner[:-len("</div>")]
    return parts


def live_part(page: str) -> str:
    m = re.search(r'<div id="overview-live"[^>]*>.*', page, re.S)
    assert m, "no live part"
    return m.group(0)


def test_a_sampling_control_answer_carries_its_followers_parts(client):
    query = dict(prompt=PROMPT, s_temp=0.55, open="dec-beams")
    moved = client.get(url("/section/sampling", **query),
                       headers={**HX, "HX-Target": "sampling-distribution",
                                "HX-Trigger": "s_temp-range", "X-Follows": FOLLOWS})
    assert moved.status_code == 200
    assert "HX-Trigger" not in moved.headers          # nobody needs to ask again
    assert "X-Follows" in moved.headers["Vary"]
    page = text_of(moved)
    parts = oob_parts(page)
    # decoding's samples read the sampler; Sampling does not follow itself, tokenization reads
    # nothing of it, and a name that is no part id is ignored
    assert list(parts) == ["decoding-samples"]
    own = text_of(client.get(url("/section/decoding", **query),
                             headers={**HX, "HX-Target": "decoding-samples",
                                      "HX-Trigger": "decoding-refresh"}))
    rows = table_rows(parts["decoding-samples"], SAMPLES, headers=True)
    assert len(rows) == 5 and rows == table_rows(own, SAMPLES, headers=True)
    # the overview's live part, out of band by its id, as its own request draws it
    live = re.search(r'<div id="overview-live"[^>]*hx-swap-oob="true"', page)
    assert live
    alone = text_of(client.get(url("/overview", **query),
                               headers={**HX, "HX-Target": "overview-live",
                                        "HX-Trigger": "overview-follow"}))
    assert live_part(page).replace(' hx-swap-oob="true"', "", 1).startswith(
        live_part(alone).split('<p class="error"')[0])


def test_without_the_header_the_answer_names_the_event(client):
    moved = client.get(url("/section/sampling", prompt=PROMPT, s_temp=0.45, open="dec-beams"),
                       headers={**HX, "HX-Target": "sampling-distribution",
                                "HX-Trigger": "s_temp-range"})
    assert moved.headers["HX-Trigger"] == "sampling-changed"
    assert "hx-swap-oob=\"innerHTML:" not in text_of(moved)


def test_the_overviews_sampler_brings_samplings_and_decodings_parts(client):
    query = dict(prompt=PROMPT, s_temp=0.65, open="dec-beams")
    moved = client.get(url("/overview", **query),
                       headers={**HX, "HX-Target": "overview-live", "HX-Trigger": "ov-temp",
                                "X-Follows": FOLLOWS})
    assert moved.status_code == 200 and "HX-Trigger" not in moved.headers
    parts = oob_parts(text_of(moved))
    assert sorted(parts) == ["decoding-samples", "sampling-distribution"]
    own = text_of(client.get(url("/section/sampling", **query),
                             headers={**HX, "HX-Target": "sampling-distribution",
                                      "HX-Trigger": "sampling-follow"}))
    survivors = re.compile(r'<p class="stats live" id="survivors">(.*?)</p>', re.S)
    assert survivors.search(parts["sampling-distribution"]).group(1) == \
        survivors.search(own).group(1)
    # the live part is the answer itself, not sent twice
    assert text_of(moved).count('id="overview-live"') == 1


def test_a_control_nobody_follows_brings_nothing(client):
    r = client.get(url("/section/decoding", prompt=PROMPT, b_width=2, open="dec-beams"),
                   headers={**HX, "HX-Target": "decoding-search", "HX-Trigger": "b_width-range",
                            "X-Follows": FOLLOWS})
    assert r.status_code == 200 and "HX-Trigger" not in r.headers
    assert "hx-swap-oob=\"innerHTML:" not in text_of(r)


def test_answers_differing_in_their_followers_are_not_shared(client):
    """Identical requests share one answer (web/serving/shared_answers.py): the followers named
    are part of what makes two requests identical."""
    query = url("/section/sampling", prompt=PROMPT, s_temp=0.35, open="dec-beams")
    headers = {**HX, "HX-Target": "sampling-distribution", "HX-Trigger": "s_temp-range"}
    none = text_of(client.get(query, headers={**headers, "X-Follows": ""}))
    some = text_of(client.get(query, headers={**headers, "X-Follows": "decoding-samples"}))
    assert list(oob_parts(none)) == [] and list(oob_parts(some)) == ["decoding-samples"]


def test_far_followers_are_named_stale_and_not_computed(app, client):
    """The places far from the screen (X-Follows-Later) are not rendered into the answer: it
    names those that follow this change (X-Stale), in the order asked, and computes nothing
    for them (the decoding section is not built); the page asks for each when it nears the
    screen."""
    builds = app.extensions["explainer"].builds
    query = dict(prompt=PROMPT, s_temp=0.75, open="dec-beams")
    before = builds["decoding"]
    moved = client.get(url("/section/sampling", **query),
                       headers={**HX, "HX-Target": "sampling-distribution",
                                "HX-Trigger": "s_temp-range", "X-Follows": "",
                                "X-Follows-Later": FOLLOWS})
    assert moved.status_code == 200 and "HX-Trigger" not in moved.headers
    assert "X-Follows-Later" in moved.headers["Vary"]
    page = text_of(moved)
    assert oob_parts(page) == {} and 'id="overview-live"' not in page
    # sampling does not follow itself; tokenization reads nothing of the sampler; a bad name is
    # ignored
    assert moved.headers["X-Stale"] == "decoding-samples,overview-live"
    assert builds["decoding"] == before


def test_near_and_far_followers_split_one_answer(app, client):
    """A follower near the screen comes out of band; one far from it is only named stale: the
    overview's sampler brings Sampling's distribution and leaves decoding's samples for later."""
    builds = app.extensions["explainer"].builds
    query = dict(prompt=PROMPT, s_temp=0.85, open="dec-beams")
    before = builds["decoding"]
    moved = client.get(url("/overview", **query),
                       headers={**HX, "HX-Target": "overview-live", "HX-Trigger": "ov-temp",
                                "X-Follows": "sampling-distribution",
                                "X-Follows-Later": "decoding-samples,chat-answer"})
    assert moved.status_code == 200
    assert list(oob_parts(text_of(moved))) == ["sampling-distribution"]
    # chat follows the sampler too (its answer drawn by it)
    assert moved.headers["X-Stale"] == "decoding-samples,chat-answer"
    assert builds["decoding"] == before


def test_a_control_nobody_follows_names_nothing_stale(client):
    r = client.get(url("/section/decoding", prompt=PROMPT, b_width=3, open="dec-beams"),
                   headers={**HX, "HX-Target": "decoding-search", "HX-Trigger": "b_width-range",
                            "X-Follows": "", "X-Follows-Later": FOLLOWS})
    assert r.status_code == 200 and "X-Stale" not in r.headers


def test_a_beam_control_leaves_samples_out_of_sight_for_later(app, client):
    """Decoding's samples sit inside the part a beam control answers: named far from the screen
    (X-Follows-Later), samples not computed yet are left out (no decode step: a note says they
    come) and the answer names them stale; their own request draws them, and once computed a
    beam control's answer draws them again at no cost."""
    from web.sections import decoding
    query = dict(prompt=PROMPT, s_temp=0.95, b_width=2, open="dec-beams")
    later = {**HX, "HX-Target": "decoding-search", "HX-Trigger": "b_width-range",
             "X-Follows": "", "X-Follows-Later": "decoding-samples"}
    with app.app_context():
        computed = decoding._continued.computed
    moved = client.get(url("/section/decoding", **query), headers=later)
    assert moved.status_code == 200 and moved.headers["X-Stale"] == "decoding-samples"
    page = text_of(moved)
    assert "Drawing the samples as they come into view" in page
    assert SAMPLES not in page and 'id="decoding-refresh"' in page
    with app.app_context():
        assert decoding._continued.computed == computed          # no sample was run
    own = text_of(client.get(url("/section/decoding", **query),
                             headers={**HX, "HX-Target": "decoding-samples",
                                      "HX-Trigger": "decoding-refresh",
                                      "X-Follows-Later": "decoding-samples"}))
    rows = table_rows(own, SAMPLES, headers=True)
    assert len(rows) == 5 and [r[0] for r in rows[2:]] == ["sample, seed 0", "sample, seed 1",
                                                           "sample, seed 2"]
    again = client.get(url("/section/decoding", **dict(query, b_width=3)), headers=later)
    assert "X-Stale" not in again.headers
    assert table_rows(text_of(again), SAMPLES, headers=True)[2:] == rows[2:]


def test_samples_near_the_screen_are_drawn_in_a_beam_controls_answer(client):
    query = dict(prompt=PROMPT, s_temp=1.05, b_width=2, open="dec-beams")
    moved = client.get(url("/section/decoding", **query),
                       headers={**HX, "HX-Target": "decoding-search",
                                "HX-Trigger": "b_width-range", "X-Follows": "decoding-samples",
                                "X-Follows-Later": ""})
    assert moved.status_code == 200 and "X-Stale" not in moved.headers
    assert len(table_rows(text_of(moved), SAMPLES, headers=True)) == 5
