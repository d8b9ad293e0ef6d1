"""The answer, streamed token by token as Server-Sent Events: GET /generate/stream?<page state>.

The query is the page's own state (the prompt, the new-token limit `gen_max`, the pause
`gen_pace`, the sampler's settings), validated by web/core/params.py like every other request; a bad
value is a 4xx JSON answer {"errors": {name: message}} before any work starts. Then:

    event: start   {"prompt_tokens", "max_new_tokens", "pace_ms"}
    event: token   {"i", "id", "text", "phase", "ms", "prob"} one per new token; "ms" is the
                   measured model pass (the prefill for the first token, one decode step after),
                   "text" the newly complete text (a token may hold part of a character: those
                   bytes wait for the next token, see pipeline.generation.TextStream)
    event: done    {"reason": "eos" | "limit" | "context", "n_tokens", "prefill_ms",
                    "decode_ms": median per decoded token, "tokens_per_s": decode speed,
                    "message": the line the page shows (as text): why the loop stopped, in
                    words (done_message; the chat's own: web/serving/chat_stream.py), and the
                    times}

Each event is written to the socket as soon as it exists: waitress sends every chunk an app
yields at once (its `send_bytes` is 1 since waitress 3; tests/test_web_streaming.py checks that
the first token arrives before the work is done). When the client goes away (the stop button,
a closed tab) the loop stops before its next model pass: waitress, run with
SERVER_OPTIONS (`channel_request_lookahead`), keeps reading the socket while it serves the
stream, sees it close and answers True to `environ["waitress.client_disconnected"]()`, which the
loop asks before every pass. (Without that option it would only notice when a write fails, a
step or two later, and then close the response iterator, which closes the loop too.)

At most MAX_STREAMS answers are generated at once (one per core of the classroom server): the
next one gets 503 with a message and Retry-After.
"""
import json
import statistics
import threading
import time
from collections import deque

from flask import Blueprint, Response, current_app, jsonify, request

from pipeline.generation import TextStream, generation_steps
from web.classroom.withheld import withheld
from web.core.request_state import current_state
from web.core.sampler_settings import sampler_for
from web.presentation.numbers import count, fixed

bp = Blueprint("streaming", __name__)

MAX_STREAMS = 2
# waitress options for web/serving/server.py (and the tests' servers): read ahead on a busy
# connection,
# so a client that closed it is noticed at once (waitress's documented purpose for this option).
SERVER_OPTIONS = {"channel_request_lookahead": 1}


class StreamSlots:
    """The answers being generated (each a progress dict {"steps", "reason"}, updated as the
    loop runs) and the last finished ones: the limit is enforced here, and tests read them."""

    def __init__(self, limit: int):
        self.limit = limit
        self.running = []                   # progress dicts of the streams now generating
        self.finished = deque(maxlen=64)    # their final state, in the order they ended
        self.changed = threading.Condition()

    @property
    def active(self) -> int:
        return len(self.running)

    def acquire(self):
        """A new progress dict, or None when `limit` streams are already running."""
        with self.changed:
            if len(self.running) >= self.limit:
                return None
            progress = {"steps": 0, "reason": "disconnected"}
            self.running.append(progress)
            return progress

    def release(self, progress: dict):
        with self.changed:
            if any(p is progress for p in self.running):
                self.running = [p for p in self.running if p is not progress]
                self.finished.append(dict(progress))
                self.changed.notify_all()


def stream_slots() -> StreamSlots:
    """This app's stream slots (web/model_state/explainer.py)."""
    return current_app.extensions["explainer"].slots


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode("utf-8")


# Why the loop stopped, for each stop reason of pipeline.generation.finish_reason, as the
# generation loop's closing line says it.
STOPPED_BECAUSE = {"eos": "the model chose its end-of-text token",
                   "limit": "the new-token limit was reached",
                   "context": "the context window is full"}


def ms(value) -> str:
    """A measured time as the page writes it: "2.31 ms", or "–" when there is none (no decode
    step after a one-token answer)."""
    return "–" if value is None else f"{fixed(value, 2)} ms"


def done_message(done: dict, last) -> str:
    """The generation loop's closing line, from the done event's fields: the tokens made, why
    the loop stopped, the prefill and the median decode step, and the decode speed. `last`:
    the loop's last step (unused here; the chat's line names its probability)."""
    speed = done["tokens_per_s"]
    return (f"Done: {count(done['n_tokens'], 'token')}; stopped because "
            f"{STOPPED_BECAUSE[done['reason']]}. Prefill {ms(done['prefill_ms'])}, then "
            f"{ms(done['decode_ms'])} per token (median)"
            + (f", {speed:g} tokens/s of model time." if speed else "."))


def answer_events(model, ids, max_new_tokens, pace_seconds, sample, should_stop, progress,
                  on_end=lambda: None, n_top=1, extra=None, message=done_message):
    """The stream's bytes, event by event; `progress` (a dict) counts the steps done;
    `on_end()` runs when the loop ends, however it ends. `extra(step)`: more fields of a token
    event (web/serving/chat_stream.py: its chip and the step's `n_top` candidates).
    `message(done, last_step)`: the done event's line."""
    text = TextStream(model.tokenizer)
    eos = model.config.eos_token_id
    yield sse("start", {"prompt_tokens": len(ids), "max_new_tokens": max_new_tokens,
                        "pace_ms": round(pace_seconds * 1000)})
    steps = generation_steps(model, ids, max_new_tokens, sample=sample, n_top=n_top,
                             should_stop=should_stop)
    decode_seconds, prefill_seconds = [], None
    try:
        for step in steps:
            progress["steps"] += 1
            if step.phase == "prefill":
                prefill_seconds = step.forward_seconds
            else:
                decode_seconds.append(step.forward_seconds)
            piece = "" if step.token == eos else text.push(step.token)
            if step.finish:
                piece += text.flush()
            yield sse("token", {"i": step.index, "id": step.token, "text": piece,
                                "phase": step.phase, "eos": step.token == eos,
                                "ms": round(step.forward_seconds * 1000, 3),
                                "prob": round(step.prob, 5),
                                **(extra(step) if extra else {})})
            if step.finish:
                progress["reason"] = step.finish
                decode = statistics.median(decode_seconds) if decode_seconds else None
                done = {"reason": step.finish, "n_tokens": step.index + 1,
                        "prefill_ms": round(prefill_seconds * 1000, 3),
                        "decode_ms": None if decode is None else round(decode * 1000, 3),
                        "tokens_per_s": None if decode is None else round(1 / decode, 1)}
                yield sse("done", {**done, "message": message(done, step)})
                return
            if pace_seconds:
                time.sleep(pace_seconds)   # only to let a reader watch; not counted in "ms"
    finally:
        steps.close()
        on_end()


@bp.get("/generate/stream")
def stream():
    """The continuation of the prompt, streamed as Server-Sent Events (see the module doc)."""
    lm, state = current_state()
    if withheld().covers("stream"):           # a class's member while its poll is open
        return jsonify(errors={"stream": "Withheld until the reveal: your class has a poll "
                                         "open, and the model's answer would give it away."}), 403
    sample = None if state.errors else sampler_for(state)    # may refuse a sampler setting
    if state.errors:
        return jsonify(errors=state.errors), state.status
    ids = lm.tokenizer.encode_ordinary(state["prompt"])
    current_app.logger.debug("streaming %d new tokens", state["gen_max"])
    return event_stream(lambda gone, progress, release: answer_events(
        lm.model, ids, state["gen_max"], state["gen_pace"] / 1000, sample, gone, progress,
        release))


def event_stream(events):
    """The streamed answer as a response, in one of the server's stream slots: events(gone,
    progress, release) makes the body (gone: waitress's flag, True once it has seen the
    client's socket close). With every slot taken, a 503 that says so. The slot is released
    once, when the body ends or the response closes (also when the body was never read)."""
    slots = stream_slots()
    progress = slots.acquire()
    if progress is None:
        response = jsonify(errors={"stream": (
            f"{slots.limit} answers are already being generated on this server, the most it "
            "runs at once so the page stays quick for everyone. Try again in a few seconds.")})
        response.status_code = 503
        response.headers["Retry-After"] = "5"
        return response

    def release():                  # runs twice (the loop's end, the response's close): once
        slots.release(progress)

    try:
        gone = request.environ.get("waitress.client_disconnected")
        response = Response(events(gone, progress, release), mimetype="text/event-stream")
    except Exception:
        release()
        raise
    response.headers["Cache-Control"] = "no-cache, no-transform"
    response.headers["X-Accel-Buffering"] = "no"      # a proxy in front must not buffer it
    response.call_on_close(release)
    return response
