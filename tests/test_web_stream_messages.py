"""The line the page shows when a stream ends is the server's: the done event's "message"
(web/serving/streaming.py, web/serving/chat_stream.py; static/stream.js sets it as text). For
every stop reason each stream can reach, the run is the pipeline's own (the same prompt, limit
and greedy choice), the event's reason is the pipeline's finish reason, and the message says
that reason in its words, the pipeline's token count and the event's own measured times.
The generation loop stops at the end-of-text token, the new-token limit or a full context
window; the chat at its end-of-turn token or the limit (its route refuses a limit past the
window, tests/test_web_chat.py)."""
import json
import statistics

import pytest

from pipeline.generation import generation_steps
from web_support import text_of, url

# The opening of Pride and Prejudice: long enough that 200 new tokens pass the Austen model's
# 256-token window.
LONG = ("It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife. However little known the feelings or views of "
        "such a man may be on his first entering a neighbourhood, this truth is so well fixed "
        "in the minds of the surrounding families, that he is considered the rightful property "
        "of some one or other of their daughters.")
STOPPED_BECAUSE = {"eos": "the model chose its end-of-text token",
                   "limit": "the new-token limit was reached",
                   "context": "the context window is full"}


def events(response) -> list:
    out = []
    for block in text_of(response).split("\n\n"):
        lines = block.strip().split("\n")
        if len(lines) == 2 and lines[0].startswith("event: "):
            out.append((lines[0][7:], json.loads(lines[1][6:])))
    return out


def ms(value) -> str:
    return "–" if value is None else f"{value:.2f} ms"


def tokens(n: int) -> str:
    return f"{n} token" if n == 1 else f"{n} tokens"


def check_times(done: dict, streamed: list):
    """The done event's times are the token events' own: the prefill is the first token's pass,
    the decode time the median of the others (each rounded to the microsecond first)."""
    assert done["prefill_ms"] == streamed[0]["ms"]
    decode = [t["ms"] for t in streamed[1:]]
    if decode:
        assert abs(done["decode_ms"] - statistics.median(decode)) <= 0.001
        # the speed is 1 / the median before it was rounded to the microsecond (and to 0.1)
        d = done["decode_ms"]
        assert abs(done["tokens_per_s"] - 1000 / d) <= 1000 / d * 0.0005 / d + 0.05
    else:
        assert done["decode_ms"] is None and done["tokens_per_s"] is None


# "]" is the one-token prompt whose greedy answer is the end-of-text token at once (found by
# running the model on each token alone; the test checks that the pipeline still ends there).
@pytest.mark.parametrize("prompt, gen_max, reason", [
    ("]", 20, "eos"),
    ("It is a truth universally acknowledged", 5, "limit"),
    (LONG, 200, "context"),
])
def test_the_generation_streams_done_message_says_the_pipelines_stop(client, app, prompt,
                                                                      gen_max, reason):
    model = app.extensions["explainer"].default_model.model
    ids = model.tokenizer.encode_ordinary(prompt)
    steps = list(generation_steps(model, ids, gen_max))
    assert steps[-1].finish == reason                   # the case this run is about
    r = client.get(url("/generate/stream", prompt=prompt, gen_max=gen_max, gen_pace=0,
                       gen_choose="greedy"))
    assert r.status_code == 200
    ev = events(r)
    streamed = [d for e, d in ev if e == "token"]
    assert [t["id"] for t in streamed] == [s.token for s in steps]
    name, done = ev[-1]
    assert name == "done" and done["reason"] == reason and done["n_tokens"] == len(steps)
    check_times(done, streamed)
    speed = done["tokens_per_s"]
    assert done["message"] == (
        f"Done: {tokens(len(steps))}; stopped because {STOPPED_BECAUSE[reason]}. "
        f"Prefill {ms(done['prefill_ms'])}, then {ms(done['decode_ms'])} per token (median)"
        + (f", {speed:g} tokens/s of model time." if speed else "."))
    if reason == "context":                             # the window's last position was read
        assert len(ids) + len(steps) == model.config.n_ctx + 1


@pytest.fixture()
def smol(smol_app):
    with smol_app.app_context():
        yield smol_app.test_client(), smol_app.extensions["explainer"].models["smollm2"]


@pytest.mark.parametrize("chat_max, reason", [(60, "eos"), (3, "limit")])
def test_the_chat_streams_done_message_says_the_pipelines_stop(smol, chat_max, reason):
    from web.sections.chat import PARAMS, chat_of
    client, lm = smol
    question = next(p.default for p in PARAMS if p.name == "chat_q")
    ids = chat_of(lm, question, "")["ids"]
    steps = list(generation_steps(lm.model, ids, chat_max, n_top=1))     # greedy
    assert steps[-1].finish == reason
    r = client.get(url("/chat/stream", model="smollm2", chat_max=chat_max))
    assert r.status_code == 200
    ev = events(r)
    streamed = [d for e, d in ev if e == "token"]
    assert [t["id"] for t in streamed] == [s.token for s in steps]
    name, done = ev[-1]
    assert name == "done" and done["reason"] == reason and done["n_tokens"] == len(steps)
    check_times(done, streamed)
    # SmolLM2's end of turn: <|im_end|>, id 2, the end-of-sequence token its file names
    assert lm.model.config.eos_token_id == 2
    if reason == "eos":
        why = ("Stopped by <|im_end|> (id 2): the model chose its end-of-turn token, the "
               "end-of-sequence token its file names, which the template writes after every "
               f"turn (p = {round(steps[-1].prob, 5):.4f}).")
    else:
        why = (f"Stopped by the new-token limit ({tokens(chat_max)}): the model had not yet "
               "chosen <|im_end|>.")
    assert done["message"] == (
        f"{why} {tokens(len(steps))}; prefill {ms(done['prefill_ms'])}, then "
        f"{ms(done['decode_ms'])} per token (median).")


@pytest.mark.parametrize("path", ["/generate/stream", "/chat/stream"])
def test_a_busy_servers_refusal_of_a_stream_is_its_message_as_text(model, path):
    """The streams' fetch takes no HTML (Accept: text/event-stream): a busy server's 503 says
    its message as plain text, which static/stream.js shows (it showed a JSON parse error of
    the busy page before); a page load still gets the busy page."""
    from app import create_app
    from web.core import limits
    tight = create_app({"MODEL": model, "TESTING": True, "PROBE_ENCODINGS": False,
                        "WARM_CACHES": False, "GATE_SLOTS": 1, "GATE_WAITING": 0})
    client = tight.test_client()
    gate = tight.extensions["explainer_gate"]
    gate.acquire()                                 # another request is computing
    try:
        r = client.get(path, headers={"Accept": "text/event-stream"})
        assert r.status_code == 503 and r.mimetype == "text/plain"
        assert text_of(r) == limits.BUSY_MESSAGE
        assert r.headers["Retry-After"] == str(limits.RETRY_AFTER_SECONDS)
        page = client.get(path, headers={"Accept": "text/html,*/*;q=0.8"})
        assert page.status_code == 503 and page.mimetype == "text/html"
    finally:
        gate.release()
