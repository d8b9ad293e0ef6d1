"""The model the app serves, with what the sections read from it, computed once at start.

In web/ the wrapper (a LoadedModel) is called `lm` and the pipeline model it holds (`lm.model`,
a pipeline.model.Model) `model`."""
import os
from dataclasses import dataclass

from pipeline.tokenizer import is_tiktoken_dir, mergeable_ranks, pretokenizer_pattern
from web import encodings


@dataclass(frozen=True)
class LoadedModel:
    model: object            # pipeline model: .tokenizer, .config, .path
    name: str                # directory name, shown on the page
    ranks: dict              # token bytes -> rank, for replaying BPE merges
    pat_str: str             # the pre-tokenizer regex
    n_ctx: int               # context window: the longest prompt the model reads
    other_encodings: tuple   # web.encodings.OtherEncoding, probed once
    own_tokenizer: bool      # learned by the project's pipeline/bpe.py (tiktoken_config.json)
    draft: object = None     # draft model for speculative decoding (same tokenizer), or None
    draft_problem: str = ""  # why there is no draft model

    @property
    def tokenizer(self):
        return self.model.tokenizer

    @classmethod
    def wrap(cls, model, probe_encodings=True, draft=None, draft_problem=""):
        path = getattr(model, "path", None)
        return cls(model=model,
                   name=os.path.basename(os.path.normpath(path)) if path else "model",
                   ranks=mergeable_ranks(model.tokenizer),
                   pat_str=pretokenizer_pattern(path),
                   n_ctx=model.config.n_ctx,
                   other_encodings=encodings.probe() if probe_encodings else (),
                   own_tokenizer=is_tiktoken_dir(path),
                   draft=draft, draft_problem=draft_problem)
