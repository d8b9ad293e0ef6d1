"""Feed-forward: the non-linearity of the running model with the real pre- and post-activation
values of one token in one layer, their histogram, the most active neurons, and which prompt
tokens drive one neuron.

Every value is read from the activation cache of the prompt's forward pass
(web.model_state.forward.prompt_run): blocks.{i}.mlp.hook_pre (GELU input / SwiGLU gate),
blocks.{i}.mlp.hook_pre_linear (SwiGLU up-projection) and blocks.{i}.mlp.hook_post. The curve
and the check use pipeline.model's own gelu / silu through pipeline.feedforward.
"""
import numpy as np

from pipeline.feedforward import (
    activation,
    activation_curve,
    formula_error,
    histogram,
    top_neurons,
    top_tokens,
)
from web.core.params import Param
from web.figures import feedforward as figures
from web.model_state.forward import prompt_run
from web.presentation.tokens import token_pieces, token_plain
from web.sections import Section

N_TOP = 10            # rows of the most-active-neurons table
N_TOKENS = 5          # prompt tokens named for the chosen neuron
BINS = 40             # histogram bars

PARAMS = (
    Param("ffn_layer", "Feed-forward layer", kind="int", min=0, max=999),     # default: last
    Param("ffn_token", "Feed-forward token", kind="int", min=0, max=9999,
          resets_with_prompt=True),                                           # default: last
    # Empty (the default) means "the most active neuron of this token": the box stays empty
    # until a neuron is chosen, so the default follows the token and the layer.
    Param("ffn_neuron", "Neuron", default="", max_chars=12),
)

GATED = ("swiglu", "geglu")          # gate and up multiplied (Llama's SiLU, Gemma's GELU)
FORMULAS = {
    "swiglu": dict(name="SwiGLU", function="silu",
                   pre="gate = x · W_gate", post="post = silu(gate) × up",
                   definition="silu(z) = z · sigmoid(z) = z / (1 + e^−z)"),
    "geglu": dict(name="GeGLU", function="gelu",
                  pre="gate = x · W_gate", post="post = gelu(gate) × up",
                  definition="gelu(z) = ½ · z · (1 + tanh(√(2/π) · (z + 0.044715 · z³)))"),
    "gelu": dict(name="GELU", function="gelu",
                 pre="pre = x · W_fc + b_fc", post="post = gelu(pre)",
                 definition="gelu(z) = ½ · z · (1 + tanh(√(2/π) · (z + 0.044715 · z³)))"),
}


def build(lm, state) -> dict:
    """Template context for the feed-forward section."""
    cfg = lm.model.config
    run = prompt_run(lm, state["prompt"])
    T = len(run.ids)
    layer = state.index_within("ffn_layer", cfg.n_layers, "layer", "this model has",
                               default=cfg.n_layers - 1)
    t = state.index_within("ffn_token", T, "token", default=T - 1)
    b = f"blocks.{layer}.mlp."
    pre_all, post_all = run.cache[b + "hook_pre"], run.cache[b + "hook_post"]   # [T, d_ff]
    up_all = run.cache.get(b + "hook_pre_linear")                              # SwiGLU only
    pre, post = pre_all[t], post_all[t]                                         # [d_ff]
    up = None if up_all is None else up_all[t]
    act_pre = activation(cfg.mlp)(pre)             # gelu(pre) = post; silu(gate) = post / up
    top = top_neurons(post, N_TOP)
    neuron = chosen_neuron(state, int(top[0]), cfg.d_ff)

    tok = lm.tokenizer
    tokens = [dict(id=i, pieces=token_pieces(tok, i),
                   label=token_plain(tok, i)) for i in run.ids]
    lo = float(min(pre.min(), -4.0)) - 0.5
    hi = float(max(pre.max(), 4.0)) + 0.5
    curve_x, curve_y = activation_curve(cfg.mlp, lo, hi)
    counts, edges = histogram(post, BINS)
    column = post_all[:, neuron]                                                # [T]
    biggest = float(np.abs(column).max()) or 1.0
    return dict(
        model_name=lm.name, formula=FORMULAS[cfg.mlp], mlp=cfg.mlp, swiglu=cfg.mlp in GATED,
        d_model=cfg.d_model, d_ff=cfg.d_ff, n_layers=cfg.n_layers, layer=layer, token=t,
        n_tokens=T, tokens=tokens, neuron=neuron,
        row_error=formula_error(cfg.mlp, pre, up, post),
        layer_error=formula_error(cfg.mlp, pre_all, up_all, post_all),
        n_positive=int((post > 0).sum()), n_negative=int((post < 0).sum()),
        n_small=int((np.abs(post) < 0.1 * np.abs(post).max()).sum()),
        top_share=100 * float(np.abs(post[top]).sum() / max(float(np.abs(post).sum()), 1e-30)),
        top_rows=[dict(neuron=int(n), pre=float(pre[n]), act=float(act_pre[n]),
                       up=None if up is None else float(up[n]), post=float(post[n]))
                  for n in top],
        neuron_row=[dict(index=s, value=float(v), alpha=abs(float(v)) / biggest)
                    for s, v in enumerate(column)],
        neuron_top=[dict(index=int(s), value=float(column[s]))
                    for s in top_tokens(post_all, neuron, N_TOKENS)],
        neuron_here=float(post[neuron]), most_active=int(top[0]),
        # GELU: the cached post-activations themselves lie on the curve; SwiGLU: silu(gate), the
        # factor each up-projection value is multiplied by
        curve_figure=figures.activation_figure(
            curve_x, curve_y, pre, post if up is None else act_pre, top,
            FORMULAS[cfg.mlp]["function"], layer, t),
        histogram_figure=figures.histogram_figure(counts, edges, layer, t),
    )


def chosen_neuron(state, most_active: int, d_ff: int) -> int:
    raw = state["ffn_neuron"].strip()
    if raw == "":
        return most_active
    if raw.isascii() and raw.isdigit() and int(raw) < d_ff:
        return int(raw)
    if raw.isascii() and raw.isdigit():
        state.reject("ffn_neuron", f"Neuron {int(raw)} does not exist: this layer has {d_ff} "
                     f"neurons (0 to {d_ff - 1}).")
    else:
        state.reject("ffn_neuron", f"Neuron must be a whole number from 0 to {d_ff - 1}, or "
                     f"empty for the most active one; got {raw[:12]!r}.", 400)
    return most_active


SECTION = Section("feedforward", "Feed-forward", PARAMS, build,
                  shorter="FFN",
                  tour=("After attention, each token's vector goes through a small two-layer "
                        "network of its own, with a non-linearity in the middle. This is where "
                        "most of the parameters live. See the real activations of one token and "
                        "which neurons fire the most."))
