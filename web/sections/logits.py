"""Logits and softmax: the model's raw scores for the token after the prompt, the probabilities
softmax makes of them, and how temperature reshapes them.

The scores are the last row of the prompt's cached forward pass (`web.forward.prompt_run`);
probabilities and entropy come from `pipeline.sampling`, the same functions the sampler uses.
The "confident example" is found by running the model on a fixed list of candidate prompts (famous
lines and names from its training text), once per model, and keeping the most confident.
"""
import os

import numpy as np
from flask import current_app

from pipeline.ranking import top_k
from pipeline.sampling import entropy_bits, softmax_with_temperature, tokens_holding_mass
from web.cache import memoized
from web.figures import logits as figures
from web.forward import prompt_ids, prompt_run
from web.params import Param
from web.sampler_settings import DEFAULT_TEMPERATURE
from web.tokens import token_plain

TOP = 10                                  # rows of the table
TOP_BARS = 12                             # bars in the figure
CURVE_TEMPERATURES = np.round(np.arange(0.05, 2.0001, 0.05), 2)   # the entropy-vs-T curve

PARAMS = (
    # the page's one default temperature (the overview's and the Sampling section's, a common chat
    # setting): the chart shows it beside the model's own T = 1
    Param("lg_temp", "Temperature", kind="float", default=DEFAULT_TEMPERATURE, min=0.0, max=2.0),
)

# the France prompt's source: not in the Austen model's corpus (said so on every model)
NOT_AUSTEN = "not in Austen's novels"

# Candidate prompts for "where a confident prediction comes from": lines and names from the six
# novels the default model was trained on (in training chapters, see models/austen's model card),
# one famous line that is not in them (the 2005 film of Pride and Prejudice gave Darcy “you have
# bewitched me, body and soul”; the model card says so), and the “capital of France” prompt that
# explainers of large models show, which this model cannot know.
CANDIDATES = (
    ("Pride and Prejudice", "the advice of Lady Catherine de"),
    ("Sense and Sensibility", "Marianne and Colonel"),
    ("Mansfield Park, ch. 1", "About thirty years ago Miss Maria Ward, of Huntingdon, with "
     "only seven thousand"),
    ("Mansfield Park", "Fanny could not help thinking of Sir"),
    ("Persuasion", "Anne had never seen Captain"),
    ("Emma", "Mr. Weston's son, Frank"),
    ("Pride and Prejudice, ch. 1", "It is a truth universally acknowledged, that a single man "
     "in possession of a good fortune, must be in want of a"),
    ("the 2005 film of Pride and Prejudice, not the novel", "you have bewitched me, body and"),
    (NOT_AUSTEN, "The capital of France is"),
)

def warm(lm):
    confident_examples(lm)


@memoized(4)
def confident_examples(lm) -> list:
    """Each candidate's top next token and its probability under this model, most confident
    first (computed once per model: nine short forward passes)."""
    rows = []
    for source, prompt in CANDIDATES:
        ids = prompt_ids(lm, prompt)
        if len(ids) > lm.n_ctx:                       # a tiny test model's short context
            continue
        logits = lm.model.forward(list(ids))[-1]                           # [V]
        p = softmax_with_temperature(logits, 1.0)
        top = int(np.argmax(p))
        rows.append(dict(source=source, prompt=prompt, id=top, p=float(p[top]),
                         text=token_plain(lm.tokenizer, top)))
    return sorted(rows, key=lambda r: -r["p"])


def build(lm, state) -> dict:
    """Template context for the logits section."""
    run = prompt_run(lm, state["prompt"])
    logits = run.next_logits                                       # [V]: after the last token
    temp = state["lg_temp"]
    p1 = softmax_with_temperature(logits, 1.0)                     # [V] the model's own
    pt = softmax_with_temperature(logits, temp)                    # [V] reshaped
    order = top_k(logits, max(TOP, TOP_BARS))                      # best score first
    rows = [dict(rank=r + 1, id=int(i), text=token_text(lm, i), logit=float(logits[i]),
                 p1=float(p1[i]), pt=float(pt[i])) for r, i in enumerate(order[:TOP])]
    curve = [entropy_bits(softmax_with_temperature(logits, float(t)))
             for t in CURVE_TEMPERATURES]
    examples = confident_examples(lm)
    last = token_plain(lm.tokenizer, run.ids[-1])
    return dict(
        temp=temp, rows=rows, vocab_size=len(logits), last_token=last,
        n_tokens=len(run.ids),
        logit_max=float(logits.max()), logit_min=float(logits.min()),
        entropy=abs(entropy_bits(pt)), entropy1=entropy_bits(p1),   # abs: one-hot gives -0.0
        max_entropy=float(np.log2(len(logits))),
        top_p=float(pt[order[0]]), top_p1=float(p1[order[0]]),
        mass50=tokens_holding_mass(pt, 0.5), mass90=tokens_holding_mass(pt, 0.9),
        mass90_1=tokens_holding_mass(p1, 0.9),
        examples=examples, best=examples[0] if examples else None,
        trained_on_austen=trained_on_austen(lm.model),
        france=next((r for r in examples if r["source"] == NOT_AUSTEN), None),
        model_param=None if lm.key == current_app.extensions["explainer"].default else lm.key,
        probs_figure=figures.probs_figure(
            [token_text(lm, i) for i in order[:TOP_BARS]], p1[order[:TOP_BARS]],
            pt[order[:TOP_BARS]], temp),
        entropy_figure=figures.entropy_figure(CURVE_TEMPERATURES.tolist(), curve, temp,
                                              entropy_bits(pt)),
    )


def trained_on_austen(model) -> bool:
    """The project's own models (training/train_model.py writes training_log.json beside them)
    are trained on Jane Austen's novels; of any other checkpoint the page claims nothing."""
    return bool(model.path) and os.path.exists(os.path.join(model.path, "training_log.json"))


def token_text(lm, i) -> str:
    return token_plain(lm.tokenizer, i)
