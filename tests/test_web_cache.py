"""web.core.cache and web.model_state.measured: each entry computed once (also under concurrent
requests), each
timing measured once per model and shown the same everywhere, section results cached with the
messages their builds left on the state."""
import re
import threading

import pytest
from flask import current_app, has_app_context

from web.core.cache import Memo, cached_build, memoized, model_key
from web.core.params import Param, Query, parse_state
from web.core.registry import all_params
from web.core.registry import section as find_section
from web.model_state import measured as measured_module
from web.model_state.measured import cost_table, stamp
from web_support import HX, every_section, text_of, url

PROMPTS = ("Elizabeth walked to Netherfield", "Mr. Darcy looked at her and said nothing at all")


# --- Memo ----------------------------------------------------------------------------------

def test_an_entry_is_computed_once_under_concurrent_requests():
    memo = Memo("test", 8)
    inside, release = threading.Event(), threading.Event()
    calls = []

    def compute():
        calls.append(1)
        inside.set()
        release.wait(10)
        return object()

    results = []
    first = threading.Thread(target=lambda: results.append(memo.get("k", compute)))
    first.start()
    assert inside.wait(10)                     # the first request is computing the entry
    others = [threading.Thread(target=lambda: results.append(memo.get("k", compute)))
              for _ in range(5)]
    for t in others:
        t.start()
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert len(calls) == 1 and memo.computed == 1
    assert len(results) == 6 and all(r is results[0] for r in results)


def test_a_failed_computation_is_not_kept_and_a_waiting_request_computes_it():
    memo = Memo("test", 8)
    inside, release = threading.Event(), threading.Event()

    def fail():
        inside.set()
        release.wait(10)
        raise RuntimeError("over budget")

    errors, results = [], []

    def first():
        try:
            memo.get("k", fail)
        except RuntimeError as e:
            errors.append(e)
    t1 = threading.Thread(target=first)
    t1.start()
    assert inside.wait(10)
    t2 = threading.Thread(target=lambda: results.append(memo.get("k", lambda: "second")))
    t2.start()
    release.set()
    t1.join(10), t2.join(10)
    assert len(errors) == 1 and results == ["second"]
    assert memo.get("k", lambda: "third") == "second"


def test_least_recently_used_entries_go_first():
    memo = Memo("test", 2)
    memo.get("a", lambda: 1), memo.get("b", lambda: 2)
    memo.get("a", lambda: 0)                   # a is used again: b is now the oldest
    memo.get("c", lambda: 3)
    assert "a" in memo and "c" in memo and "b" not in memo


def test_a_byte_budget_drops_the_oldest_entries_as_kept_ones_grow():
    memo = Memo("test", 10, max_bytes=100, weigh=len)
    a, b = [0] * 40, [0] * 40
    memo.get("a", lambda: a), memo.get("b", lambda: b)
    assert "a" in memo and "b" in memo                  # 80 bytes: both kept
    a.extend([0] * 30)                                  # a kept entry grows (a run read lazily)
    memo.get("c", lambda: [0] * 10)                     # 70 + 40 + 10 > 100: a goes
    assert "a" not in memo and "b" in memo and "c" in memo
    memo.get("huge", lambda: [0] * 500)                 # the newest is always kept
    assert list(memo._entries) == ["huge"]


def test_memoized_keys_a_model_by_its_directory(model):
    calls = []

    @memoized(4)
    def n_layers(m, extra):
        calls.append(extra)
        return m.config.n_layers

    assert n_layers(model, 1) == n_layers(model, 1) == model.config.n_layers
    assert n_layers(model, 2) == model.config.n_layers
    assert calls == [1, 2]
    assert n_layers.memo.peek((("model", model_key(model)), 1)) == model.config.n_layers


# --- measurements: once per model, the same everywhere --------------------------------------

@pytest.fixture()
def counted(model, monkeypatch):
    """A new app on the same model (its own caches: nothing measured yet, as in a fresh
    process), in whose context the test runs, and the count of calls of each measuring
    function: (app, counts)."""
    import pipeline.costs
    import pipeline.roofline
    from app import create_app
    from web.sections import speculative
    counts = {}
    fresh = None

    def count(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            # only this app's: another app's warm-up thread may still be measuring for its own
            if has_app_context() and current_app._get_current_object() is fresh:
                counts[name] = counts.get(name, 0) + 1
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)

    # web.model_state.measured imports it when it measures
    count(pipeline.costs, "measure_costs")
    count(pipeline.roofline, "measure_machine")
    count(speculative, "measure_speed")
    fresh = create_app({"MODEL": model, "TESTING": True, "WARM_CACHES": False,
                        "PROBE_ENCODINGS": False})
    # the process's roof measured again for this app, the earlier one back after the test
    with measured_module.machine_measured_again(), fresh.app_context():
        yield fresh, counts


def test_each_measurement_is_made_once_across_prompts_and_renders(counted):
    app, counted = counted
    client = app.test_client()
    for prompt in PROMPTS:
        for _ in range(2):
            assert client.get(url("/", prompt=prompt), headers=every_section()).status_code \
                == 200
            for sid in ("generation", "kvcache", "roofline", "speculative", "batching"):
                client.get(url(f"/section/{sid}", prompt=prompt), headers=HX)
    lm = app.extensions["explainer"].default_model
    expected = {"measure_costs": 1, "measure_machine": 1}
    if lm.draft is not None:
        expected["measure_speed"] = 1
    assert counted == expected


def test_the_sections_warm_makes_the_measurements_before_any_request(counted):
    from web.core.registry import SECTIONS
    app, counted = counted
    lm = app.extensions["explainer"].default_model
    for s in SECTIONS:
        if s.warm is not None:
            s.warm(lm)
    assert counted["measure_costs"] == 1 and counted["measure_machine"] == 1
    assert counted.get("measure_speed", 0) == (lm.draft is not None)
    app.test_client().get(url("/", prompt=PROMPTS[0]), headers=every_section())
    assert counted["measure_costs"] == 1 and counted["measure_machine"] == 1


def test_two_apps_share_no_cache_or_measurement(counted, app):
    """Each app holds its own caches (web/model_state/explainer.py): a measurement made for one is
    not
    another's, and each app's counters are its own."""
    fresh, counted = counted
    with app.app_context():
        before = measured_module.measurements()
        cost_table(app.extensions["explainer"].default_model)
        assert measured_module.measurements() - before <= 1
    assert counted.get("measure_costs", 0) <= 1
    with fresh.app_context():
        assert measured_module.measurements() == 0
        cost_table(fresh.extensions["explainer"].default_model)
        assert measured_module.measurements() == 1
    assert fresh.extensions["explainer"].caches is not app.extensions["explainer"].caches


def test_a_worker_forked_after_warm_shows_the_parents_measurement(app):
    """What web/serving/server.py does: warm in the parent, then fork the workers. A forked worker
    measures nothing again and shows the parent's numbers with the parent's time."""
    with app.app_context():
        forked_worker_shows_the_parents_measurement(app)


def forked_worker_shows_the_parents_measurement(app):
    import multiprocessing

    from web.core.registry import SECTIONS
    lm = app.extensions["explainer"].default_model
    for t in threading.enumerate():            # no other thread may hold a lock at the fork
        if t.name == "warm-sections":
            t.join(120)
    for s in SECTIONS:
        if s.warm is not None:
            s.warm(lm)
    parent = text_of(app.test_client().get(url("/section/kvcache", prompt=PROMPTS[0]),
                                           headers=HX))
    made = measured_module.measurements()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def worker():
        page = text_of(app.test_client().get(url("/section/kvcache", prompt=PROMPTS[0]),
                                             headers=HX))
        with app.app_context():
            queue.put((page, measured_module.measurements()))
    child = ctx.Process(target=worker)
    child.start()
    page, child_made = queue.get(timeout=120)
    child.join(30)
    assert child_made == made                     # no new measurement in the worker
    summary = re.compile(r'<p class="stats" id="kv-summary">.*?</p>', re.S)
    assert summary.search(page).group(0) == summary.search(parent).group(0)


def shown_costs(html: str, section_id: str) -> list:
    """[(what, at, ms)] of every time quoted from the cost table in that section."""
    part = re.search(r'<section id="%s".*?</section>' % section_id, html, re.S).group(0)
    return re.findall(r'<span class="cost"[^>]*data-what="([^"]+)" data-at="(\d+)" '
                      r'data-ms="([^"]+)"', part)


def test_one_cost_table_is_cited_by_every_section_that_shows_a_time(client, model):
    prompt = PROMPTS[1]
    page = text_of(client.get(url("/", prompt=prompt), headers=every_section()))
    lm = client.application.extensions["explainer"].default_model
    table = cost_table(lm)
    n = len(model.tokenizer.encode_ordinary(prompt))
    read = {"a prefill": table.prefill_at, "one decode step": table.decode_at}
    for sid in ("generation", "kvcache", "roofline"):
        shown = shown_costs(page, sid)
        assert shown, sid
        for what, at, ms in shown:
            assert ms == read[what](int(at)).shown, (sid, what, at)
        assert ("a prefill", str(n), table.prefill_at(n).shown) in shown or sid == "kvcache"
        assert stamp(table.measured_at) in re.search(r'<section id="%s".*?</section>' % sid,
                                                     page, re.S).group(0)


@pytest.mark.parametrize("sid", ["generation", "kvcache", "roofline", "speculative",
                                 "batching"])
def test_the_page_and_the_sections_own_answer_show_the_same_measurement(client, sid):
    query = dict(prompt=PROMPTS[0])
    page = text_of(client.get(url("/", **query), headers=every_section()))
    own = text_of(client.get(url(f"/section/{sid}", **query), headers=HX))
    in_page = re.search(r'<section id="%s".*?</section>' % sid, page, re.S).group(0)
    stamps = re.findall(r"\d\d:\d\d:\d\d UTC", own)
    assert stamps and stamps == re.findall(r"\d\d:\d\d:\d\d UTC", in_page)
    numbers = re.findall(r"([0-9]+\.[0-9]+) ms", own)
    assert numbers and numbers == re.findall(r"([0-9]+\.[0-9]+) ms", in_page)


# --- a section's result, cached with what its build did to the state ----------------------------

class FakeSection:
    id = "fake"
    reads = ()
    params = (Param("fk_n", "N", kind="int", default=3, min=0, max=10),
              Param("fk_i", "Index", kind="int", min=0, max=99))

    def __init__(self):
        self.builds = 0

    def build(self, lm, state):
        self.builds += 1
        if state["fk_n"] > 5:
            state.reject("fk_n", f"At most 5 here; got {state['fk_n']}.")
        i = state.resolve("fk_i", state["fk_n"] * 2)
        return dict(n=state["fk_n"], i=i, rows=[1, 2])


def fresh_state(query: bytes, s):
    from web.core.params import PROMPT
    return parse_state(query, [PROMPT, *s.params])


def test_a_cached_build_replays_its_rejects_and_resolved_defaults(app):
    lm = app.extensions["explainer"].default_model
    s = FakeSection()
    first = fresh_state(b"fk_n=7", s)
    ctx = cached_build(s, lm, first)
    second = fresh_state(b"fk_n=7", s)
    again = cached_build(s, lm, second)
    assert s.builds == 1
    assert again == ctx == dict(n=3, i=6, rows=[1, 2])
    for st in (first, second):
        assert st.errors == {"fk_n": "At most 5 here; got 7."}
        assert st.statuses == {"fk_n": 422} and st.status == 422
        assert st["fk_n"] == 3 and st["fk_i"] == 6 and st.computed == {"fk_i": 6}
    # another value is another entry; a value that needs no message leaves none
    ok = fresh_state(b"fk_n=4", s)
    assert cached_build(s, lm, ok)["i"] == 8 and ok.errors == {} and s.builds == 2
    # the caller gets its own top-level dict: changing it does not change the entry
    again["n"] = 99
    assert cached_build(s, lm, fresh_state(b"fk_n=7", s))["n"] == 3


def test_a_build_reads_a_query_and_leaves_the_requests_state_alone():
    """A build gets a read-only Query: what it finds goes to its Outcome (and it reads its own
    findings back), the request's State is unchanged until the caller applies the outcome."""
    s = FakeSection()
    state = fresh_state(b"fk_n=7", s)
    before = [dict(d) for d in (state.values, state.errors, state.statuses, state.computed)]
    query = Query(state)
    assert s.build(None, query) == dict(n=3, i=6, rows=[1, 2])
    assert [state.values, state.errors, state.statuses, state.computed] == before
    assert query.outcome.errors == {"fk_n": "At most 5 here; got 7."}
    assert query.outcome.values == {"fk_n": 3, "fk_i": 6} and query.outcome.computed == {"fk_i": 6}
    with pytest.raises(TypeError):
        query.raw["fk_n"] = "1"                       # what was asked cannot be rewritten
    query.outcome.apply(state)
    assert state["fk_n"] == 3 and state.status == 422 and state.computed == {"fk_i": 6}


def test_a_real_sections_reject_is_replayed(app):
    lm = app.extensions["explainer"].default_model
    s = find_section("generation")
    query = b"prompt=Elizabeth+walked&gen_max=3&gen_step=5"
    states = [parse_state(query, all_params()) for _ in range(2)]
    contexts = [cached_build(s, lm, st) for st in states]
    message = ("Step 5 does not exist: with this prompt and limit the loop makes 3 steps "
               "(0 to 2).")
    for st in states:
        assert st.errors == {"gen_step": message} and st.status == 422
        assert st["gen_step"] == 0
    assert contexts[0]["step"] == contexts[1]["step"] == 0
    assert contexts[0]["steps"] is contexts[1]["steps"]       # one build, shared


def test_a_cached_section_follows_the_parameters_it_reads(client):
    """The decoding section's samples use the sampling section's settings: the same decoding
    values with another sampler are another entry, not the first answer again (the samples are
    shown while their disclosure is open)."""
    q = {"prompt": "Elizabeth smiled at Mr. Darcy.", "s_seed": "3", "open": "dec-beams"}
    first = client.get(url("/section/decoding", **q), headers=HX).get_data(as_text=True)
    again = client.get(url("/section/decoding", **q), headers=HX).get_data(as_text=True)
    other = client.get(url("/section/decoding", **{**q, "s_seed": "4", "s_temp": "1.7"}),
                       headers=HX).get_data(as_text=True)
    assert first == again
    assert other != first
