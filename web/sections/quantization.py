"""Quantization: the running model's linear layers stored in 8, 4 or 3 bits, and what it costs.

Every number comes from `pipeline.quantize` applied to the loaded model (memory from the real
arrays, logits and perplexity from the engine's forward pass on the dequantized weights), or
from the same storage formula applied to published configs (`pipeline.published`).
Prompt-independent work (quantizing, the held-out perplexity) runs once per process.

A big model (web.model_state.explainer.BIG_MODEL_PARAMS) served with the server's disk cache
(web/model_state/disk_cache.py) keeps every scheme on disk, quantized once per model (in the
warm-up, when the server first starts with this code): its codes and its float32 weights,
mapped read-only and shared by every worker, so a scheme's pass on the prompt costs what
float32's does (SmolLM2: 7 schemes, 3.0 GB of float32 files, within KEEP_FLOAT_BYTES). Without
that disk, or when the schemes would not fit in it, it keeps only each scheme's codes and scales
and dequantizes a block at a time during the forward pass (quantize_model(..., on_the_fly=True):
the same logits, bit for bit). Either way its quantized greedy texts check float32's in one pass
(quantize.greedy_by_checking) and it scores fewer tokens of the chapter. The held-out perplexity
and the weights' change of every scheme do not depend on the prompt: they are kept on disk too.
A model read from a GGUF file also shows how the file stores it: its tensors' types and one
real block of bytes.
"""
import functools
import hashlib
import os

import numpy as np

from pipeline import quantize
from pipeline.decoding import continue_batch
from pipeline.generation import decode_loop
from pipeline.gguf_file import read_stored_bytes
from pipeline.published import published
from pipeline.sampling import greedy
from pipeline.sizes import parameter_counts
from web.core.cache import memo, memoized, model_key
from web.core.params import Param
from web.figures import quantization as figures
from web.model_state.disk_cache import current_disk, kept, kept_arrays
from web.model_state.explainer import is_big
from web.model_state.forward import prefilled, prompt_run
from web.presentation.tokens import token_plain
from web.presentation.tour import open_disclosures
from web.sections import Section

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELDOUT_PATH = os.path.join(ROOT, "data", "heldout_pride_and_prejudice_ch10.txt")
HELDOUT_WINDOWS = 2          # windows of the held-out chapter (2 x 256 tokens: 510 predictions)
HELDOUT_WINDOW = 256         # tokens per window, or the model's context if shorter
BIG_HELDOUT_WINDOWS = 1      # a big model: 1 window of 128 tokens (127 predictions): a pass
BIG_HELDOUT_WINDOW = 128     #   over 256 tokens of a 135 M-parameter model takes 0.7 s here
SHOWN_Q4_1 = ("blocks", 0, "attn", "w_q")   # the stored block shown of a GGUF model: block 0
GREEDY_TOKENS = 12           # greedy continuation shown for each scheme
GREEDY_TOKENS_BIG = 6        # for a big model: its quantized steps decode every block's weights
                             #   again (~0.13 s a step for SmolLM2), and a new prompt waits


def greedy_length(model) -> int:
    return GREEDY_TOKENS_BIG if big(model) else GREEDY_TOKENS
# the published models whose weight memory the section lists (the block section lists them all)
CALC_MODELS = ("GPT-2 small", "Llama 3.2 1B", "Llama 2 7B", "Llama 3 8B", "Llama 3 70B",
               "Llama 3.1 405B")

PARAMS = (
    # 3 bits by default: on the Austen model int4-g32 barely moves anything (perplexity 34.15 ->
    # 34.25 on its held-out chapter, the same greedy text), int3-g32 does (35.64; its greedy
    # text parts from float32's); 4 bits are one choice away and the page compares the two
    Param("q_bits", "Bits (grouped scheme)", kind="int", default=3,
          choices=quantize.GROUPED_BITS),
    Param("q_group", "Group size", kind="int", default=32, choices=quantize.GROUP_SIZES),
    # no default of its own: this model's first feed-forward output matrix (default_matrix)
    Param("q_matrix", "Matrix", max_chars=64),
)


DEFAULT_BITS = next(p.default for p in PARAMS if p.name == "q_bits")
DEFAULT_GROUP = next(p.default for p in PARAMS if p.name == "q_group")


# --- cached per process (web.core.cache: one entry per model, computed once) ----------------------

def big(model) -> bool:
    return is_big(model)


# every scheme the section offers: float32 (None), int8 and the grouped ones
SCHEMES = (None, "int8", *(f"int{b}-g{g}" for b in quantize.GROUPED_BITS
                           for g in quantize.GROUP_SIZES))
# A big model's schemes are kept on disk when their float32 weights fit in this many bytes
# (SmolLM2: 6 x 106 M weights x 4 B = 2.5 GB, 3.0 GB with int8); a bigger model dequantizes on
# the fly instead.
KEEP_FLOAT_BYTES = 4_000_000_000
# the code a kept scheme depends on besides the model's file: how the file becomes float32
# weights, and how they are quantized (a change elsewhere does not quantize again)
SCHEME_CODE = ("pipeline/quantize.py", "pipeline/gguf_file.py", "pipeline/loader.py")


def kept_on_disk(model) -> bool:
    """A big model's schemes are kept on the server's disk, mapped (see the docstring)."""
    if not big(model) or current_disk() is None or not model.path:
        return False
    n = sum(w.size for w in quantize.linear_weights(model.params).values())
    return 4 * n * (len(SCHEMES) - 1) <= KEEP_FLOAT_BYTES


_kept_schemes = memo("quantized schemes, mapped", 16, big_size=len(SCHEMES))


@memoized(16)         # a big model keeps a quarter: its 4 schemes (codes and scales, 290 MB)
def quantized_in_memory(model, scheme_name: str) -> quantize.QuantizedModel:
    return quantize.quantize_model(model, quantize.scheme(scheme_name), on_the_fly=big(model))


def quantized(model, scheme_name: str) -> quantize.QuantizedModel:
    """The model quantized with a scheme: read back from the disk (mapped) for a big model
    served with a disk cache, else held in memory."""
    if not kept_on_disk(model):
        return quantized_in_memory(model, scheme_name)
    s = quantize.scheme(scheme_name)
    key = (model_key(model), scheme_name)
    return _kept_schemes.get(key, lambda: quantize.model_from_arrays(model, s, kept_arrays(
        "quantized schemes", key, lambda: quantize.scheme_arrays(model, s), SCHEME_CODE)))


def scheme_model(model, scheme_name):
    return model if scheme_name is None else quantized(model, scheme_name).model


def heldout_windows_of(model) -> tuple:
    """(windows, window length) scored on this model: fewer, shorter ones on a big model."""
    return ((BIG_HELDOUT_WINDOWS, min(BIG_HELDOUT_WINDOW, model.config.n_ctx)) if big(model)
            else (HELDOUT_WINDOWS, heldout_window(model)))


@memoized(32)         # a big model keeps a quarter: its 8 schemes' results
def heldout(model, scheme_name) -> quantize.HeldoutResult:
    """Perplexity of a scheme (None: float32) on the committed chapter: prompt-independent,
    kept on the server's disk between starts."""
    with open(HELDOUT_PATH, encoding="utf-8") as f:
        text = f.read()
    shape = heldout_windows_of(model)

    def measure():
        windows = quantize.heldout_windows(model.tokenizer, text, *shape)
        return quantize.heldout_perplexity(scheme_model(model, scheme_name), windows)
    return kept("quantization", ("heldout", model_key(model), scheme_name, shape,
                                 hashlib.sha256(text.encode()).hexdigest()), measure)


@memoized(64)
def prompt_logits(model, scheme_name: str, ids: tuple):
    if big(model):        # the checking pass's rows of the prompt: one pass, not two
        return checked_greedy(model, scheme_name, ids)[1]
    return scheme_model(model, scheme_name).forward(list(ids))


@memoized(64)
def greedy_tokens(model, scheme_name, ids: tuple) -> tuple:
    if scheme_name is not None and big(model):
        return checked_greedy(model, scheme_name, ids)[0]
    if scheme_name is None:           # float32: from the prompt's shared run
        return tuple(continue_batch(model, ids, [greedy], greedy_length(model),
                                    start=prefilled(model, ids))[0].tokens)
    return tuple(p.token for p in decode_loop(scheme_model(model, scheme_name), list(ids),
                                              greedy_length(model)))


# a big model's checked texts: every scheme of a few prompts (the default prompt's are warmed),
# each entry holding its prompt's logits (a 5-token prompt of SmolLM2: 1 MB)
_checked = memo("quantized greedy texts, checked", 16, big_size=2 * len(SCHEMES),
                big_bytes=64 << 20, weigh=lambda entry: entry[1].nbytes)


def checked_greedy(model, scheme_name, ids: tuple) -> tuple:
    """A big model's quantized greedy text, float32's checked in one pass (then its own
    decoding from the first token that differs), and that pass's logits of the prompt."""
    def check():
        guess = greedy_tokens(model, None, ids)
        tokens, logits = quantize.greedy_by_checking(scheme_model(model, scheme_name),
                                                     list(ids), greedy_length(model), guess)
        return tuple(tokens), logits[:len(ids)].copy()
    return _checked.get((model_key(model), scheme_name, ids), check)


@memoized(16)
def weight_change(model, scheme_name) -> dict:
    """How far a scheme moves the weights: prompt-independent, kept on the server's disk."""
    return kept("quantization", ("weight change", model_key(model), scheme_name),
                lambda: quantize.weight_change(model, quantized(model, scheme_name)))


def warm(lm):
    """Prompt-independent work, run once in the background when the app starts: every scheme
    quantized (a big model's kept on disk, mapped) and its held-out perplexity measured (and,
    of a GGUF model, how far it moves the file's weights), each kept on disk between starts."""
    for scheme_name in SCHEMES:
        if scheme_name is not None and kept_on_disk(lm.model):
            quantized(lm.model, scheme_name)
        heldout(lm.model, scheme_name)
        if scheme_name is not None and lm.model.file_format == "gguf":
            weight_change(lm.model, scheme_name)
    names = list(quantize.linear_weights(lm.model.params))
    bits, group = DEFAULT_BITS, DEFAULT_GROUP
    histogram_context(lm.model, default_matrix(names), group, bits)
    calculator(group, bits)
    if lm.model.file_format == "gguf":
        stored_context(lm.model)
    # The page opens on the model's default prompt: what every scheme does to it (its logits
    # and greedy text, shown while a disclosure is open) is run here once, so that a class
    # moving the bits and the group size on it finds each scheme's pass made (on SmolLM2 a
    # scheme's checked greedy text is 0.1-0.3 s of CPU).
    ids = prompt_run(lm, lm.default_prompt).ids
    for scheme_name in SCHEMES:
        if scheme_name is not None:
            prompt_logits(lm.model, scheme_name, ids)
        greedy_tokens(lm.model, scheme_name, ids)


# --- the section -----------------------------------------------------------------------------

def heldout_window(model) -> int:
    return min(HELDOUT_WINDOW, model.config.n_ctx)


def kept_in_float(config) -> str:
    """What stays in float32, from the config: everything pipeline.quantize.linear_weights
    does not quantize."""
    parts = ["the token embedding (which this model also uses as its output layer)"
             if config.tied_embeddings else "the token embedding",
             None if config.tied_embeddings else "the separate output layer",
             "the position table" if config.positions == "learned" else None,
             "the norms",
             "the biases" if config.model_type == "gpt2" else None]
    parts = [p for p in parts if p]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def default_matrix(names) -> str:
    """The first feed-forward output matrix: the widest inputs, so the longest columns."""
    return next((n for n in names if n.endswith(("mlp.w_down", "mlp.w_proj"))), names[0])


# The disclosures that show what each scheme does to this prompt (logits, top tokens, greedy
# texts): measured only while one is open (the page asks again when one opens), so that a
# control of the section does not wait for a quantized pass it does not show; on a big model
# those passes dequantize every block (most of a second each).
PROMPT_DISCLOSURES = ("q-measured", "q-file")


def prompt_measured(state) -> bool:
    return bool(set(PROMPT_DISCLOSURES) & set(open_disclosures(state)))


def scheme_row(lm, state, ids, float_logits, scheme_name, on_prompt=True):
    """A scheme's row; on_prompt=False leaves out what it does to this prompt (None)."""
    model = lm.model
    held, held_float = heldout(model, scheme_name), heldout(model, None)
    if scheme_name is None:
        memory = quantize.weight_memory(model.config, model.n_params(), None, float_bits=32)
        logits, label = float_logits, "float32"
        describe = ("the file's weights decoded to 32-bit floats" if model.file_format == "gguf"
                    else "32-bit floats, as loaded")
        bits = 32.0
    else:
        # The row's bytes are the formula's (tests/test_quantize.py: equal to the arrays for
        # every scheme); the quantized model itself is needed only for what it does to the
        # prompt: a group-size move on a big model re-quantized every weight (0.5 s) just to
        # count its bytes, once a worker kept fewer schemes than the section offers.
        scheme = quantize.scheme(scheme_name)
        memory = quantize.weight_memory(model.config, model.n_params(), scheme, float_bits=32)
        if on_prompt:
            assert memory.total_bytes == quantized(model, scheme_name).nbytes
        logits, label, describe = (prompt_logits(model, scheme_name, ids) if on_prompt
                                   else None), scheme_name, scheme.describe()
        bits = 8 * memory.linear_bytes / memory.n_linear
    tokens = greedy_tokens(model, scheme_name, ids) if on_prompt else None
    return dict(
        name=label, describe=describe, total_bytes=memory.total_bytes,
        bits=32 if scheme_name is None else quantize.scheme(scheme_name).bits,
        linear_bytes=memory.linear_bytes, other_bytes=memory.other_bytes,
        n_linear=memory.n_linear, n_groups=memory.n_groups, bits_per_weight=bits,
        max_logit_change=quantize.max_logit_change(float_logits, logits) if on_prompt else None,
        top1_prompt=quantize.top1_agreement(float_logits, logits) if on_prompt else None,
        top1_heldout=float((held.top1 == held_float.top1).mean()),
        perplexity=held.perplexity, heldout_tokens=held.n_tokens,
        greedy=None if tokens is None else [token_plain(model.tokenizer, t) for t in tokens],
        greedy_ids=None if tokens is None else list(tokens), diverges_at=None)


def scheme_rows(lm, run, schemes, on_prompt: bool) -> list:
    """The rows of the schemes; on_prompt: with what each does to the prompt (a quantized pass
    of each, memoized), else without (what the core shows)."""
    rows = [scheme_row(lm, None, run.ids, run.logits if on_prompt else None, s, on_prompt)
            for s in schemes]
    for row in rows:
        row["shrink"] = rows[0]["total_bytes"] / row["total_bytes"]
        row["ideal_shrink"] = 32 / row["bits"]                           # bits alone
    for row in rows[1:] if on_prompt else ():
        row["diverges_at"] = first_difference(row["greedy_ids"], rows[0]["greedy_ids"])
    return rows


def weight_changes(model, scheme_names: tuple) -> dict:
    return {s: weight_change(model, s) for s in scheme_names}


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)


@memoized(8)
def calculator(group_size, bits):
    schemes = [("FP16", None), ("INT8", quantize.INT8),
               (f"INT{bits}", quantize.grouped(bits, group_size))]
    rows = []
    for p in (published(name) for name in CALC_MODELS):
        n_params = parameter_counts(p.config).total      # = the checkpoint's reported count
        memories = [quantize.weight_memory(p.config, n_params, s) for _, s in schemes]
        rows.append(dict(name=p.name, repo=p.repo, n_params=n_params,
                         n_linear=memories[0].n_linear,
                         gb=[m.total_bytes / 1e9 for m in memories],
                         n_groups=[m.n_groups for m in memories]))
    return [name for name, _ in schemes], rows


@memoized(32)
def histogram_context(model, matrix_name, group_size, bits):
    """Figures of one matrix: prompt-independent, so built once per (matrix, group size,
    bits)."""
    w = quantize.linear_weights(model.params)[matrix_name]                     # [d_in, d_out]
    column = int(abs(w).max(0).argmax())              # the output channel with the largest weight
    # this matrix alone, as quantize_model quantizes each (not the whole model for one figure)
    int8 = quantize.quantize_matrix(w, quantize.INT8)
    int4 = quantize.quantize_matrix(w, quantize.grouped(bits, group_size))       # the grouped
    g = group_size
    group = int(abs(w[:, column]).argmax()) // g      # the group holding that weight
    col = w[:, column]
    chunk = col[group * g:(group + 1) * g]
    # the two histograms side by side share one x range and one bin width (the column's weights,
    # the group's, and both formats' levels): the group is seen to be a slice of the column.
    # Their heights are counts of different populations (a channel's weights, a group's), not
    # compared: each has its own y range.
    both = np.concatenate([col, int8.levels(0, column), int4.levels(group, column)])
    span = (float(both.min()), float(both.max()))
    return dict(
        matrix_shape=w.shape, column=column, group_index=group, group_start=group * g,
        group_end=min(group * g + g, w.shape[0]) - 1,
        int8_scale=float(int8.scales[0, column]), int4_scale=float(int4.scales[group, column]),
        int4_zero=int(int4.zero_points()[group, column]),
        int8_figure=figures.levels_histogram(
            *quantize.levels_histogram(col, int8.levels(0, column), bins=60, span=span), None,
            f"int8, channel {column}",
            f"{len(int8.levels(0, column))} levels {float(int8.scales[0, column]):.3g} apart: "
            "too close to draw"),
        int4_figure=figures.levels_histogram(
            *quantize.levels_histogram(chunk, int4.levels(group, column), bins=60, span=span),
            int4.levels(group, column), f"int{bits}, one group",
            f"inputs {group * g}–{min(group * g + g, w.shape[0]) - 1}; lines: its "
            f"{2 ** bits} levels"))


# --- how a GGUF file stores the model -------------------------------------------------------

def path_name(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def stored_block(model, path: tuple, k: int) -> dict:
    """Block k of the stored tensor of `path`: its bytes read back from the file, decoded by
    hand (pipeline.quantize.decode_block), and the engine's weights it became."""
    st = model.stored[path]
    raw = read_stored_bytes(model.path, st, k * st.block_bytes, st.block_bytes)
    block = quantize.decode_block(st.type_name, raw)
    where, a, b = quantize.engine_block_location(model, path, k)
    engine = quantize.engine_block_weights(model, path, k)
    if isinstance(a, slice):
        index = f"[{a.start}:{a.stop}, {b}]"
    else:
        index = f"[{a}, {b.start}:{b.stop}]"
    row, col = divmod(k * st.block_size, st.shape[0])
    head = 4 if st.type_name == "Q4_1" else 2
    return dict(
        name=st.name, type_name=st.type_name, shape=tuple(reversed(st.shape)), k=k, row=row,
        col=col, n=st.block_size, n_bytes=st.block_bytes, offset=st.offset + k * st.block_bytes,
        hex_d=raw[:2].hex(" "), hex_m=raw[2:4].hex(" ") if head == 4 else None,
        hex_q=raw[head:].hex(" "), d=float(block.d),
        m=None if block.m is None else float(block.m), codes=block.codes.tolist(),
        weights=block.weights.tolist(), engine_where=path_name(where) + index,
        equal=bool(np.array_equal(block.weights, engine)))


@memoized(4)
def stored_context(model) -> dict:
    """Prompt-independent facts of a GGUF file: its tensors per stored type, their bytes
    against float32, and the first block of a Q4_1 weight matrix."""
    tensors = quantize.stored_tensors(model)
    linear_types = {model.stored[tuple(int(p) if p.isdigit() else p for p in n.split("."))]
                    .type_name for n in quantize.linear_weights(model.params)}
    shown = SHOWN_Q4_1 if model.stored.get(SHOWN_Q4_1) is not None else None
    if shown is None or model.stored[shown].type_name not in quantize.BLOCK_FORMATS:
        shown = next((p for p, st in model.stored.items()
                      if st.type_name in quantize.BLOCK_FORMATS and len(st.shape) == 2), None)
    return dict(
        type_counts=quantize.stored_type_counts(model), n_tensors=len(tensors),
        file_bytes=sum(st.n_bytes for st in tensors.values()),
        float_file_bytes=4 * sum(st.n_elements for st in tensors.values()),
        file_size=os.path.getsize(model.path), linear_types=sorted(linear_types),
        file_type=model.metadata.get("file_type"),
        block=None if shown is None else stored_block(model, shown, 0))


def embedding_block(model, token_id: int):
    """The first block of a token's row of the embedding, when it is stored in blocks."""
    st = model.stored.get(("wte",))
    if st is None or st.type_name not in quantize.BLOCK_FORMATS:
        return None
    return stored_block(model, ("wte",), token_id * (st.shape[0] // st.block_size))


def build(lm, state) -> dict:
    """Template context for the quantization section."""
    model = lm.model
    names = list(quantize.linear_weights(model.params))
    default = default_matrix(names)             # q_matrix's Param has none: it is this model's
    state.resolve("q_matrix", default)
    state.one_of("q_matrix", names)             # one of this model's matrices
    matrix = state.resolve("q_matrix", default)   # or, refused, the default again
    group = state["q_group"]                                     # one of its Param's choices
    bits = state["q_bits"]
    run = prompt_run(lm, state["prompt"])
    ids = run.ids
    schemes = [None, "int8", f"int{bits}-g{group}"]
    rows = scheme_rows(lm, run, schemes, on_prompt=False)
    # the other bit width at this group size, prompt-independent (warmed): what it changes
    other_bits = next(b for b in quantize.GROUPED_BITS if b != bits)
    other_name = f"int{other_bits}-g{group}"
    held_other, held_float = heldout(model, other_name), heldout(model, None)
    other = dict(name=other_name, perplexity=held_other.perplexity,
                 top1_heldout=float((held_other.top1 == held_float.top1).mean()))
    calc_names, calc_rows = calculator(group, bits)
    n_windows, window = heldout_windows_of(model)
    gguf = None
    if model.file_format == "gguf" and model.stored:
        gguf = dict(stored_context(model),
                    embedding=embedding_block(model, int(ids[-1])),
                    last_token=token_plain(model.tokenizer, int(ids[-1])),
                    # every weight re-quantized against the file's: shown in the "q-file"
                    # disclosure, so computed when the template asks (it is open)
                    changes=functools.partial(weight_changes, model, tuple(schemes[1:])))
    return dict(
        model_name=lm.name, n_params=model.n_params(), n_prompt=len(ids), rows=rows,
        # the template asks for these rows only while a disclosure that shows them is open
        # (the build is cached without `open`): prompt_shown(state), then rows_on_prompt()
        prompt_shown=prompt_measured,
        rows_on_prompt=functools.partial(scheme_rows, lm, run, schemes, True),
        group=group, bits=bits, levels=2 ** bits, default_bits=DEFAULT_BITS, other=other,
        other_bits=other_bits, matrices=names, matrix=matrix,
        n_matrices=len(names), greedy_tokens=greedy_length(model),
        heldout_file=os.path.basename(HELDOUT_PATH), heldout_windows=n_windows,
        heldout_window=window, kept_in_float=kept_in_float(model.config),
        # the chapter is held out from the training text of the models trained here (they have
        # the project's own tokenizer), not from a model trained elsewhere
        held_out=lm.own_tokenizer, trained_on=lm.card.trained_on if lm.card else None,
        big=big(model), gguf=gguf,
        float_share=rows[1]["other_bytes"] / rows[0]["total_bytes"],
        calc_names=calc_names, calc_rows=calc_rows,
        **histogram_context(model, matrix, group, bits))


SECTION = Section("quantization", "Quantization", PARAMS, build,
                  shorter="Quant", warm=warm,
                  gives_away=("next-token",),
                  tour=("Weights can be stored with fewer bits: 8, 4 or 3 instead of 32 (the "
                        f"section opens at {DEFAULT_BITS}). The model "
                        "gets smaller and faster to read, and a little less exact. See how much "
                        "memory is saved and how much the answers change, on the running model."))
