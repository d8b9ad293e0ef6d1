"""Logits and softmax: the model's raw scores for the token after the prompt, the probabilities
softmax makes of them, and how temperature reshapes them.

The scores are the last row of the prompt's cached forward pass
(`web.model_state.forward.prompt_run`);
probabilities and entropy come from `pipeline.sampling`, the same functions the sampler uses,
through `web.presentation.distribution.Distribution` (one at the chosen temperature, one at T = 1).
The "confident example" is found by running the model on a fixed list of candidate prompts (famous
lines and names from its training text), once per model, and keeping the most confident.
"""
from dataclasses import dataclass

import numpy as np
from flask import current_app

from pipeline.ranking import top_k
from pipeline.sampling import softmax_with_temperature
from web.core.cache import memoized
from web.core.params import Param
from web.core.sampler_settings import DEFAULT_TEMPERATURE
from web.figures import logits as figures
from web.model_state.forward import prompt_ids, prompt_run
from web.presentation.distribution import Distribution
from web.presentation.tokens import token_plain
from web.sections import Section

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

@dataclass(frozen=True)
class Example:
    """A candidate prompt and the model's most probable next token after it."""
    source: str          # where the line comes from
    prompt: str
    id: int              # the top token
    text: str            # as the page writes it
    p: float             # its probability at T = 1


@dataclass(frozen=True)
class Row:
    """A row of the table of the highest scores."""
    rank: int            # 1: the highest score
    id: int
    text: str
    logit: float
    p1: float            # probability at T = 1
    pt: float            # at the chosen T


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
        rows.append(Example(source, prompt, top, token_plain(lm.tokenizer, top), float(p[top])))
    return sorted(rows, key=lambda r: -r.p)


def build(lm, state) -> dict:
    """Template context for the logits section."""
    run = prompt_run(lm, state["prompt"])
    logits = run.next_logits                                       # [V]: after the last token
    temp = state["lg_temp"]
    dist = Distribution.at(logits, temp)                           # reshaped by T
    own = dist if temp == 1 else Distribution.at(logits, 1.0)      # the model's own
    order = top_k(logits, max(TOP, TOP_BARS))                      # best score first
    rows = [Row(r + 1, int(i), token_text(lm, i), float(logits[i]), float(own.probs[i]),
                float(dist.probs[i])) for r, i in enumerate(order[:TOP])]
    curve = [Distribution.at(logits, float(t)).entropy for t in CURVE_TEMPERATURES]
    examples = confident_examples(lm)
    last = token_plain(lm.tokenizer, run.ids[-1])
    bars = order[:TOP_BARS]
    return dict(
        temp=temp, dist=dist, own=own, rows=rows, vocab_size=len(logits), last_token=last,
        n_tokens=len(run.ids),
        logit_max=float(logits.max()), logit_min=float(logits.min()),
        max_entropy=float(np.log2(len(logits))),
        examples=examples, best=examples[0] if examples else None,
        trained_on_austen=lm.trained_on_austen,
        france=next((r for r in examples if r.source == NOT_AUSTEN), None),
        model_param=None if lm.key == current_app.extensions["explainer"].default else lm.key,
        probs_figure=figures.probs_figure([token_text(lm, i) for i in bars], own, dist, bars),
        entropy_figure=figures.entropy_figure(CURVE_TEMPERATURES.tolist(), curve, dist),
    )


def token_text(lm, i) -> str:
    return token_plain(lm.tokenizer, i)


SECTION = Section("logits", "Logits and softmax", PARAMS, build,
                  short="Logits", warm=warm,
                  gives_away=("next-token",),
                  tour=("The last vector is compared with every token of the vocabulary: one score "
                        "(logit) each. Softmax turns the scores into probabilities that add up to "
                        "one. Temperature sharpens or flattens them. Before you look: which token "
                        "do you think comes first?"))
