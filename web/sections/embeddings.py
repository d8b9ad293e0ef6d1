"""Embeddings: the prompt's token vectors, the vocabulary mapped to 2D, neighbours, analogies.

Every number is read from the running model's token embedding table (`params["wte"]`, the
rows the engine looks up in `hook_embed`); the map and the similarities are computed from it by
pipeline/embedding_space.py. Prompt-independent work (the PCA, the unit-length table) is done
once per model.
"""
from dataclasses import dataclass

import numpy as np

from pipeline.embedding_space import (
    analogy,
    analogy_vector,
    cosine_matrix,
    cosine_neighbours,
    far_rows,
    neighbours_of_tokens,
    pca_2d,
    rank_of,
    unit_rows,
)
from web.core.cache import memo, memoized, model_key
from web.core.params import Param
from web.figures import embeddings as figures
from web.model_state.forward import prompt_run
from web.presentation.tokens import plain, token_pieces, token_plain
from web.sections import Section

MAX_HEATMAP_TOKENS = 64       # rows of the token-vector heatmap (more would not be readable)
MAX_COSINE_TOKENS = 32        # rows and columns of the prompt's cosine-similarity matrix
MAX_NEIGHBOUR_ROWS = 32       # distinct prompt tokens listed with their neighbours
ANALOGY_TOP = 8               # results listed for an analogy
MAP_NEIGHBOURS = 2            # nearest neighbours of each prompt token drawn on a density map

# Examples whose results were looked at on models/austen (the page computes them live):
# "his - he + she" gives " her" first (0.67); "brother - he + she" gives " sister" first, only
# just ahead of " mother"; "father - man + woman" does not give " mother" first (" uncle" is).
EXAMPLES = (
    dict(a="his", b="he", c="she", expect="her"),
    dict(a="brother", b="he", c="she", expect="sister"),
    dict(a="was", b="is", c="has", expect="had"),
    dict(a="father", b="man", c="woman", expect="mother"),
    dict(a="king", b="man", c="woman", expect=""),
)

EMB_K = Param("emb_k", "Neighbours per token", kind="int", default=5, min=1, max=20)
PARAMS = (
    EMB_K,
    Param("emb_a", "Word a", default="brother", max_chars=40, required=True),
    Param("emb_b", "minus word b", default="he", max_chars=40, required=True),
    Param("emb_c", "plus word c", default="she", max_chars=40, required=True),
    Param("emb_expect", "Word you expect (optional)", default="sister", max_chars=40),
)


@dataclass(frozen=True)
class Space:
    """What the section needs from a model's embedding table, computed once per model."""
    unit: np.ndarray          # [V, d] rows of unit length
    coords: np.ndarray        # [V, 2] PCA projection
    explained: np.ndarray     # [2] share of the variance along each component
    labels: tuple             # [V] token text with visible whitespace marks
    far_ids: np.ndarray       # rows that stand apart by their length (far_rows)
    far_norm: float           # the row norm that separates them
    typical_norm: float       # the median row norm
    far_cos: float            # mean cosine similarity between two of those rows
    far_beyond: float         # share of them farther out along PC 1 than every other row
    figure_base: tuple        # the vocabulary scatter, without the prompt's highlights
    dense: bool               # drawn as a density (a big vocabulary), not a dot per token


@memoized(4)
def embedding_space(model) -> Space:
    W = model.params["wte"]                                   # [V, d]
    coords, _, explained = pca_2d(W)
    tok = model.tokenizer
    labels = tuple(token_plain(tok, i) for i in range(len(W)))
    unit = unit_rows(W)
    far, threshold = far_rows(W)
    far_cos = float((unit[far] @ unit[far].T).mean()) if len(far) else float("nan")
    # where they sit on the map: the share of them beyond every other row along PC 1
    rest = np.setdiff1d(np.arange(len(W)), far)
    if len(far):
        side = 1 if coords[far, 0].mean() > coords[rest, 0].mean() else -1
        beyond = float(np.mean(side * coords[far, 0] > (side * coords[rest, 0]).max()))
    else:
        beyond = float("nan")
    return Space(unit, coords, explained, labels, far, threshold,
                 float(np.median(np.linalg.norm(W, axis=-1))), far_cos, beyond,
                 figures.vocabulary_base(coords, labels, explained, far),
                 len(W) > figures.MAX_DOTS)


# A token's nearest neighbours do not depend on the prompt: kept per token, so a new prompt
# computes only its tokens not seen before (on SmolLM2, 49,152 cosines and a top-k per token).
NEIGHBOURS = memo("embeddings.token_neighbours", 4096)


def token_neighbours(model, space, ids) -> list:
    """neighbours_of_tokens(space.unit, ids, k) with the most any setting shows (k: emb_k's
    maximum; a smaller setting shows the first ones), each token's row kept (per model and
    token); the tokens not kept yet are computed together, in one product."""
    mk, k = model_key(model), max(EMB_K.max, MAP_NEIGHBOURS)
    found = {i: NEIGHBOURS.peek((mk, i, k)) for i in ids}
    missing = [i for i in ids if found[i] is None]
    for i, row in zip(missing, neighbours_of_tokens(space.unit, missing, k), strict=True):
        found[i] = NEIGHBOURS.get((mk, i, k), lambda row=row: row)
    return [found[i] for i in ids]


def build(lm, state) -> dict:
    """Template context for the embeddings section."""
    model = lm.model
    run = prompt_run(lm, state["prompt"])
    ids = list(run.ids)
    space = embedding_space(model)
    vectors = run.cache["hook_embed"]                         # [T, d]: rows of wte
    k = state["emb_k"]
    distinct = list(dict.fromkeys(ids))[:MAX_NEIGHBOUR_ROWS]
    neighbour_rows = []
    on_map = []               # (id, text) of neighbours drawn on a density map
    for i, (nids, sims) in zip(distinct, token_neighbours(model, space, distinct), strict=True):
        neighbour_rows.append(dict(
            id=i, pieces=token_pieces(model.tokenizer, i),
            neighbours=[dict(id=int(n), text=space.labels[n], sim=float(s))
                        for n, s in zip(nids[:k], sims[:k], strict=True)]))
        if space.dense:
            on_map += [(int(n), space.labels[n]) for n in nids[:MAP_NEIGHBOURS]]
    shown = min(len(ids), MAX_HEATMAP_TOKENS)
    n_cos = min(len(ids), MAX_COSINE_TOKENS)
    ctx = dict(
        d_model=model.config.d_model, vocab_size=model.config.vocab_size, n_tokens=len(ids),
        n_params=model.n_params(), austen=lm.trained_on_austen,
        n_shown=shown, model_name=lm.name, tied=model.config.tied_embeddings,
        explained=[float(e) for e in space.explained], k=k,
        neighbour_rows=neighbour_rows, n_distinct=len(dict.fromkeys(ids)),
        max_neighbour_rows=MAX_NEIGHBOUR_ROWS,
        vector_norms=[float(np.linalg.norm(v)) for v in vectors[:shown]],
        cosine_figure=figures.cosine_matrix_heatmap(
            cosine_matrix(vectors[:n_cos]), [space.labels[i] for i in ids[:n_cos]]),
        n_cos=n_cos,
        n_far=len(space.far_ids), far_norm=space.far_norm, typical_norm=space.typical_norm,
        far_cos=space.far_cos, far_beyond=space.far_beyond,
        far_in_prompt=sorted(set(ids) & set(space.far_ids.tolist())),
        heatmap_figure=figures.token_vectors_heatmap(
            vectors[:shown], [space.labels[i] for i in ids[:shown]]),
        map_figure=figures.vocabulary_map(space.figure_base, space.coords, ids,
                                          [space.labels[i] for i in ids], on_map),
        map_dense=space.dense, map_neighbours=MAP_NEIGHBOURS,
        map_cells=figures.DENSITY_BINS,
    )
    ctx.update(analogy_context(lm, state, space))
    return ctx


def single_token(tokenizer, word: str):
    """(id, text used) for a word: ' word' (as it appears mid-sentence) or 'word' (at the start
    of a line), whichever is one token, the leading-space form first; (None, message) if neither."""
    word = word.strip()
    tried = []
    for form in (" " + word, word):
        ids = tokenizer.encode_ordinary(form)
        if len(ids) == 1:
            return ids[0], form
        tried.append(f"“{plain(form.encode())}” is {len(ids)} tokens ("
                     + " + ".join(f"“{token_plain(tokenizer, i)}”"
                                  for i in ids) + ")")
    return None, (f"“{word}” is not a single token of this vocabulary: " + "; ".join(tried)
                  + ". Try a common word.")


def analogy_context(lm, state, space) -> dict:
    tok = lm.tokenizer
    used, unfit = {}, []
    for name in ("emb_a", "emb_b", "emb_c", "emb_expect"):
        if name in state.errors or (name == "emb_expect" and not state[name].strip()):
            continue
        token, form = single_token(tok, state[name])
        if token is None and name not in state.raw:
            # a default word that another model's vocabulary lacks: no error, just no result
            unfit.append(state[name])
        elif token is None:
            state.reject(name, form)
        else:
            used[name] = dict(id=token, text=plain(form.encode()))
    ctx = dict(examples=EXAMPLES, used=used, analogy_rows=None, unfit=unfit)
    if not all(n in used for n in ("emb_a", "emb_b", "emb_c")):
        return ctx
    a, b, c = (used[n]["id"] for n in ("emb_a", "emb_b", "emb_c"))
    if len({a, b, c}) < 3:
        state.reject("emb_c", "Use three different words: with a repeated word the "
                     "arithmetic cancels out.")
        return ctx
    e = used["emb_expect"]["id"] if "emb_expect" in used else None
    if e in (a, b, c):
        state.reject("emb_expect", "The expected word is one of the three inputs, which "
                     "are left out of the results.")
        e = None
    rows, near_a, near_c, ranked = analogy_numbers(lm.model, a, b, c, e)
    ctx.update(
        analogy_rows=[dict(id=i, text=space.labels[i], sim=s) for i, s in rows],
        near_a=dict(id=near_a[0], text=space.labels[near_a[0]], sim=near_a[1]),
        near_c=dict(id=near_c[0], text=space.labels[near_c[0]], sim=near_c[1]),
        expect=None if ranked is None else dict(**used["emb_expect"], rank=ranked[0],
                                                sim=ranked[1]),
        n_candidates=len(space.unit) - 3)
    return ctx


@memoized(64)
def analogy_numbers(model, a: int, b: int, c: int, e) -> tuple:
    """a - b + c's nearest tokens [(id, cosine)], the token nearest a and the one nearest c
    (a, b and c left out), and e's (rank, cosine) among all tokens (None without e): they
    depend on the words, not the prompt, so every prompt with the same words shares them
    (SmolLM2: 13 ms of cosines over 49,152 rows)."""
    unit = embedding_space(model).unit
    ids, sims = analogy(unit, a, b, c, ANALOGY_TOP)
    # The plainest explanation of a result: it is simply the word most like a (or c).
    near_a, near_a_sim = cosine_neighbours(unit, unit[a], 1, exclude=(a, b, c))
    near_c, near_c_sim = cosine_neighbours(unit, unit[c], 1, exclude=(a, b, c))
    ranked = None if e is None else rank_of(unit, analogy_vector(unit, a, b, c), e,
                                            exclude=(a, b, c))
    return ([(int(i), float(s)) for i, s in zip(ids, sims, strict=True)],
            (int(near_a[0]), float(near_a_sim[0])), (int(near_c[0]), float(near_c_sim[0])),
            ranked)


def warm(lm):
    """The prompt-independent part, once per model: the PCA map, the unit-length table, the
    labels (0.7 s for SmolLM2's 49,152 rows, a few ms for the Austen model's)."""
    embedding_space(lm.model)


SECTION = Section("embeddings", "Embeddings", PARAMS, build,
                  shorter="Embed", warm=warm,
                  tour=("Each id selects one row of a big table: a vector of a few hundred "
                        "numbers, learned in training. Tokens used in similar ways end up with "
                        "similar vectors. Here is that table squeezed to two dimensions, with your "
                        "tokens on it and their nearest neighbours."))
