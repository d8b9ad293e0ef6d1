"""The model the app serves, with what the sections read from it, computed once at start.

In web/ the wrapper (a LoadedModel) is called `lm` and the pipeline model it holds (`lm.model`,
a pipeline.model.Model) `model`."""
import os
from dataclasses import dataclass

from pipeline.loader import pretokenizer_pattern
from pipeline.tokenizer import is_tiktoken_dir, mergeable_ranks
from web.model_state import encodings
from web.model_state.explainer import card_for, is_big, model_key_name

# The longest prompt the page reads with a big model: every intermediate of a prompt is kept
# for the figures (SmolLM2's attention patterns alone are 30 x 9 x T x T floats: 35 MB at 128
# tokens, 2.3 GB at 1,024), so the page reads fewer tokens than its context window.
BIG_MODEL_PROMPT_TOKENS = 128


# A parameter whose default is another's on every model: the Logits chart's temperature starts
# at the page's one sampler temperature (the overview's and the Sampling section's), so a card
# that changes the sampler's (SmolLM2: 1.2) changes the chart's too: the page shows one T.
SAME_DEFAULT = {"lg_temp": "s_temp"}


def trained_on_austen(model) -> bool:
    """The project's own models (training/train_model.py writes training_log.json beside them)
    are trained on Jane Austen's novels; of any other checkpoint the page claims nothing."""
    return bool(model.path) and os.path.exists(os.path.join(model.path, "training_log.json"))


@dataclass(frozen=True)
class LoadedModel:
    model: object            # pipeline model: .tokenizer, .config, .path
    name: str                # directory name, shown on the page
    ranks: dict              # token bytes -> rank, for replaying BPE merges
    pat_str: str             # the pre-tokenizer regex
    n_ctx: int               # context window: the most positions the model was trained on
    other_encodings: tuple   # web.model_state.encodings.OtherEncoding, probed once
    own_tokenizer: bool      # learned by the project's pipeline/bpe.py (tiktoken_config.json)
    draft: object = None     # draft model for speculative decoding (same tokenizer), or None
    draft_problem: str = ""  # why there is no draft model
    key: str = "model"       # its name in the URL (model=) and the picker
    # web.model_state.explainer.Card: title, what it was trained on, its source
    card: object = None

    @property
    def default_prompt(self) -> str:
        return self.card.prompts[0] if self.card and self.card.prompts else ""

    def default_of(self, param):
        """This model's default for a parameter (web.core.params.Param): its card's own
        (Card.defaults:
        chosen so that a section's first screen shows its lesson on this model), else a big
        model's (Param.big_default: where the default would be too slow), else the Param's."""
        own = dict(self.card.defaults) if self.card else {}
        if param.name in own:
            return own[param.name]
        if param.name in SAME_DEFAULT and SAME_DEFAULT[param.name] in own:
            return own[SAME_DEFAULT[param.name]]
        if self.big and param.big_default is not None:
            return param.big_default
        return param.default

    @property
    def trained_on_austen(self) -> bool:
        """Trained here on Jane Austen's novels (see trained_on_austen above)."""
        return trained_on_austen(self.model)

    @property
    def n_params(self) -> int:
        return self.model.n_params()

    @property
    def big(self) -> bool:
        """A model of BIG_MODEL_PARAMS or more: fewer of its results are kept, its prompt runs
        compact (web.model_state.forward), its prompts shorter."""
        return is_big(self.model)

    @property
    def prompt_limit(self) -> int:
        """The longest prompt the page reads, in tokens: the context window, or for a big
        model BIG_MODEL_PROMPT_TOKENS (see above)."""
        if self.big:
            return min(self.n_ctx, BIG_MODEL_PROMPT_TOKENS)
        return self.n_ctx

    @property
    def tokenizer(self):
        return self.model.tokenizer

    @classmethod
    def wrap(cls, model, probe_encodings=True, draft=None, draft_problem="", key=None,
             card=None, other_encodings=None):
        """other_encodings: already probed (else probed here when probe_encodings)."""
        path = getattr(model, "path", None)
        key = key or model_key_name(path, model)
        return cls(model=model, key=key, card=card or card_for(key, model),
                   name=os.path.basename(os.path.normpath(path)) if path else "model",
                   ranks=mergeable_ranks(model.tokenizer),
                   pat_str=pretokenizer_pattern(path),
                   n_ctx=model.config.n_ctx,
                   other_encodings=(other_encodings if other_encodings is not None else
                                    encodings.probe() if probe_encodings else ()),
                   own_tokenizer=is_tiktoken_dir(path),
                   draft=draft, draft_problem=draft_problem)
