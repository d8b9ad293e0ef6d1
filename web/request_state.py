"""The validated state of a request: what the page's views and the streamed answer
(web/streaming.py) both start from."""
from flask import current_app, request

from web.params import parse_state
from web.registry import all_params


def current_state():
    """(the loaded model, the validated state of the request), the prompt's length in tokens
    checked too."""
    lm = current_app.extensions["explainer_model"]
    state = parse_state(request.query_string, all_params())
    if "prompt" not in state.errors:
        n = len(lm.tokenizer.encode_ordinary(state["prompt"]))
        if n > lm.n_ctx:
            state.reject("prompt", f"The prompt is {n} tokens long; the model reads at most "
                         f"{lm.n_ctx} tokens (its context window).")
    return lm, state
