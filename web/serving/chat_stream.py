"""The chat section's answer, streamed: GET /chat/stream?model=&chat_q=&chat_sys=&chat_max=
&chat_choose=[&s_rep=&s_temp=&s_topk=&s_topp=&s_minp=&s_seed=].

The conversation is rendered and encoded exactly as the section shows it
(web.sections.chat.chat_of), then the generation stream's own loop runs on those ids
(web.serving.streaming.answer_events: Server-Sent Events, the same slots, the stop when the client
goes
away). Greedy, or (chat_choose=sampler) drawn by the page's one sampler with its settings and
seed (web.core.sampler_settings.sampler_for: a fresh seeded generator per answer, so the same
query gives the same tokens); it stops at the model's end-of-sequence token (its end of turn) or
the limit.
Each token event also carries its chip (`pieces`, `special`) and the step's five most probable
tokens with their probabilities, so a click on a streamed token shows that step; the done
event's message says which token stopped the answer (done_message). A bad value, or
a model with no chat template, is a 4xx JSON answer {"errors": {name: message}}.
"""
from flask import Blueprint, current_app, jsonify

from web.classroom.withheld import withheld
from web.core.request_state import current_state
from web.core.sampler_settings import sampler_for
from web.presentation.numbers import count, fixed
from web.presentation.tokens import token_pieces
from web.sections.chat import ChatInputError, chat_of, no_template_reason
from web.serving.streaming import STOPPED_BECAUSE, answer_events, event_stream, ms

bp = Blueprint("chat_stream", __name__)

N_TOP = 5


def step_fields(tokenizer, specials):
    special_ids = set(specials.values())

    def extra(step) -> dict:
        return {"pieces": token_pieces(tokenizer, step.token),
                "special": step.token in special_ids,
                "n_context": step.n_context,
                "top": [{"id": i, "pieces": token_pieces(tokenizer, i),
                         "prob": round(p, 5)} for i, p in step.top]}
    return extra


def done_message(eos: int, specials: dict):
    """The chat's closing line (the done event's "message", shown as text), from the done
    event's fields and the last step: which token stopped the answer (the end-of-turn token by
    the name the model's file gives it, as the section shows it) or the limit, and the times."""
    eos_text = next((t for t, i in specials.items() if i == eos), None)

    def message(done: dict, last) -> str:
        reason, n = done["reason"], done["n_tokens"]
        if reason == "eos":
            why = (f"Stopped by {eos_text or 'its end-of-sequence token'} (id {eos}): the model "
                   "chose its end-of-turn token, the end-of-sequence token its file names, which "
                   f"the template writes after every turn (p = {fixed(round(last.prob, 5), 4)}).")
        elif reason == "limit":
            why = (f"Stopped by the new-token limit ({count(n, 'token')}): the model had not "
                   f"yet chosen {eos_text or 'its end-of-turn token'}.")
        else:
            why = f"Stopped: {STOPPED_BECAUSE[reason]}."
        return (f"{why} {count(n, 'token')}; prefill {ms(done['prefill_ms'])}, then "
                f"{ms(done['decode_ms'])} per token (median).")
    return message


@bp.get("/chat/stream")
def stream():
    lm, state = current_state()
    if withheld().covers("stream"):           # a class's member while its poll is open
        return jsonify(errors={"stream": "Withheld until the reveal: your class has a poll "
                                         "open, and the model's answer would give it away."}), 403
    sample = None if state.errors else sampler_for(state, "chat_choose")
    if state.errors:
        return jsonify(errors=state.errors), state.status
    try:
        chat = chat_of(lm, state["chat_q"], state["chat_sys"])
    except ChatInputError as e:
        return jsonify(errors={e.name: e.message}), 422
    if chat is None:
        return jsonify(errors={"model": f"{lm.name} has no chat template: "
                                        f"{no_template_reason(lm)}"}), 422
    ids = chat["ids"]
    if len(ids) + state["chat_max"] > lm.n_ctx:
        return jsonify(errors={"chat_max": (
            f"The chat is {len(ids)} tokens; with {state['chat_max']} new ones it would pass "
            f"the model's context window of {lm.n_ctx:,} tokens.")}), 422
    message = done_message(lm.model.config.eos_token_id, chat["specials"])
    current_app.logger.debug("chat: streaming up to %d new tokens", state["chat_max"])
    return event_stream(lambda gone, progress, release: answer_events(
        lm.model, ids, state["chat_max"], 0, sample, gone, progress, release, n_top=N_TOP,
        extra=step_fields(lm.tokenizer, chat["specials"]), message=message))
