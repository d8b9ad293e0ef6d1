"""The guided tour, presentation mode and theme: page-level state, kept in the URL like the rest.

The tour is the data path as numbered steps: the prompt, then every registered section in page
order. Each step's text is written here, keyed by section id; a section without text here is a
mistake that the tests catch, so the tour grows with the page.

    ?tour=3        the tour is open at step 3 (1-based); 0 or absent: closed
    ?present=1     presentation mode: large type, high contrast, one step on screen at a time
    ?theme=dark    light, dark, or auto (follow the system setting)
"""
from dataclasses import dataclass

from web.params import Param

THEMES = ("auto", "light", "dark")
PAGE_PARAMS = (
    Param("tour", "Tour step", kind="int", default=0, min=0, max=99),
    Param("present", "Presentation mode", kind="int", default=0, min=0, max=1),
    Param("theme", "Theme", default="auto", max_chars=10),
)

PROMPT_STEP = ("prompt", "The prompt", (
    "Everything starts with text. A language model does one thing: given some text, it scores "
    "every possible next piece. Type a prompt (or keep the opening of Pride and Prejudice) and "
    "follow it through the model that is running on this server, one step at a time. Every "
    "number on the way is computed for your prompt, now."))

STEP_TEXT = {
    "tokenization": (
        "The model cannot read letters. A tokenizer cuts the text into pieces from a fixed "
        "vocabulary and replaces each piece by its number (its id). The vocabulary was learned "
        "by byte-pair encoding: start from single bytes, and repeatedly glue together the pair "
        "that occurs most often. Watch the real merges rebuild a word of your prompt."),
    "embeddings": (
        "Each id selects one row of a big table: a vector of a few hundred numbers, learned in "
        "training. Tokens used in similar ways end up with similar vectors. Here is that table "
        "squeezed to two dimensions, with your tokens on it and their nearest neighbours."),
    "positions": (
        "A vector says which token, not where it is. Order enters through positions: older "
        "models add a position vector, Llama-style models rotate the queries and keys by an "
        "angle that grows with the position (RoPE), so attention scores depend on how far apart "
        "two tokens are. See it, and see what is lost when positions are removed."),
    "block": (
        "The vectors now pass through a stack of identical blocks. Each block reads the running "
        "sum of vectors (the residual stream), lets tokens exchange information (attention), "
        "transforms each token on its own (feed-forward), and adds the results back. The shapes "
        "and the parameter counts are those of the model in memory."),
    "attention": (
        "Attention is where tokens look at each other. Each token asks a question (query), every "
        "earlier token offers a label (key), and the match decides how much of each earlier "
        "token's content (value) is copied. Click a token to see whom it attends to, in every "
        "head of every layer."),
    "feedforward": (
        "After attention, each token's vector goes through a small two-layer network of its own, "
        "with a non-linearity in the middle. This is where most of the parameters live. See the "
        "real activations of one token and which neurons fire the most."),
    "logits": (
        "The last vector is compared with every token of the vocabulary: one score (logit) each. "
        "Softmax turns the scores into probabilities that add up to one. Temperature sharpens or "
        "flattens them. Before you look: which token do you think comes first?"),
    "sampling": (
        "A probability list is not yet a word. The sampler picks one token from it, after a chain "
        "of filters: repetition penalty, temperature, top-k, top-p, min-p. Move each knob and "
        "watch which tokens it removes, in the order the filters act."),
    "decoding": (
        "Choosing the best token at each step (greedy) does not always give the most probable "
        "whole sentence. Beam search keeps several candidates alive and compares their total "
        "probability. The tree shows every branch it explored and which ones it dropped."),
    "generation": (
        "Generation is a loop: run the model, pick a token, append it, run again. The first pass "
        "reads the whole prompt at once (prefill); every later pass adds one token (decode). "
        "Watch the answer stream in, token by token, with the time each step took."),
    "kvcache": (
        "Each decode step needs the keys and values of every earlier token. Recomputing them "
        "every time would be wasteful, so they are kept: the KV cache. It makes decoding fast and "
        "costs memory, which grows with every token. See both, measured."),
    "batching": (
        "A server answers many people at once. Running several sequences in one decode step costs "
        "little more than running one, because the weights are read once for all of them. How "
        "requests share the slots decides the throughput and the waiting times."),
    "quantization": (
        "Weights can be stored with fewer bits: 8 or 4 instead of 32. The model gets smaller and "
        "faster to read, and a little less exact. See how much memory is saved and how much the "
        "answers change, on the running model."),
    "speculative": (
        "A small, fast draft model guesses a few tokens ahead; the big model checks all the guesses "
        "in one pass and keeps those it agrees with. The output follows the big model's "
        "probabilities exactly, and often arrives sooner."),
    "tiling": (
        "On a GPU, moving data costs more than computing with it. FlashAttention computes "
        "attention in tiles with a running softmax, so the full table of scores is never written "
        "to slow memory. Same result, much less traffic."),
    "roofline": (
        "Why is reading the prompt fast and writing the answer slow? The prefill does many "
        "operations per byte of weights it reads; a decode step very few. The roofline shows "
        "which limit, arithmetic or memory, each phase hits on real chips."),
}


@dataclass(frozen=True)
class Step:
    number: int      # 1-based
    target: str      # the element id the step shows
    title: str
    text: str


def tour_steps(sections) -> list:
    """The prompt, then every section in page order, each with its text."""
    steps = [PROMPT_STEP] + [(s.id, s.title, STEP_TEXT[s.id]) for s in sections]
    return [Step(i + 1, target, title, text) for i, (target, title, text) in enumerate(steps)]


def page_context(state, sections) -> dict:
    """The tour's steps and the page-level state; a step past the end is a clear 422."""
    steps = tour_steps(sections)
    if state["tour"] > len(steps):
        state.reject("tour", f"The tour has {len(steps)} steps; there is no step "
                     f"{state['tour']}.")
    if state["theme"] not in THEMES:
        state.reject("theme", f"Theme must be one of {', '.join(THEMES)}; got "
                     f"{state['theme']!r}.")
    return dict(tour_steps=steps, tour_step=state["tour"], present=state["present"],
                theme=state["theme"])
