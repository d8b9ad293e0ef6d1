"""The validated state of a request: what the page's views and the streamed answer
(web/serving/streaming.py) both start from."""
from flask import current_app, g, has_request_context, request

from web.core.limits import Deadline
from web.core.params import parse_state
from web.core.registry import all_params


def explainer():
    """The app's web.model_state.explainer.Explainer: its models, caches and stream slots."""
    return current_app.extensions["explainer"]


def current_state():
    """(the loaded model, the validated state of the request): the model named by `model=`
    (an unknown name is a 422 naming the choices, and the default model answers), the prompt
    (absent: that model's own first suggestion) and its length in tokens checked too; a big
    model's own defaults (LoadedModel.default_of: its card's, a big model's) where the query
    gives no value."""
    ex = explainer()
    g.deadline = Deadline()                  # the request's time budget starts as it is read
    state = parse_state(request.query_string, all_params())
    key = state["model"]
    if key and ex.get(key) is None:
        state.reject("model", f"There is no model {key!r} on this server; the choices are: "
                     f"{ex.choices()}.")
        key = None
    lm = ex.get(key) if key else ex.default_model
    state.resolve("model", ex.default)
    if "prompt" not in state.raw and lm.default_prompt:
        state.values["prompt"] = state.computed["prompt"] = lm.default_prompt
    for p in state.params.values():
        if p.name not in state.raw and p.name != "prompt":
            own = lm.default_of(p)
            if own != p.default:
                state.values[p.name] = state.computed[p.name] = own
    if "prompt" not in state.errors:
        n = len(lm.tokenizer.encode_ordinary(state["prompt"]))
        if n > lm.prompt_limit:
            why = ("its context window" if lm.prompt_limit == lm.n_ctx else
                   f"its context window is {lm.n_ctx:,}, but the page keeps every "
                   f"intermediate of the prompt for its figures")
            state.reject("prompt", f"The prompt is {n} tokens long; with {lm.key} the page "
                         f"reads at most {lm.prompt_limit} tokens ({why}).")
    return lm, state


def deadline() -> Deadline:
    """This request's time budget (web.core.limits.Deadline), started when current_state read the
    request; outside a request, or before, one that starts now."""
    if not has_request_context():
        return Deadline()
    if "deadline" not in g:
        g.deadline = Deadline()
    return g.deadline
