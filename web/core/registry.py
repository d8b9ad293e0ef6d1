"""The sections of the explainer, in the order data flows through the model.

A section is its own files plus one line here: a module web/sections/<id>.py (its parameters, its
`build` and, last, its SECTION), a partial template templates/sections/<id>.html, its figure
builders, and its module's name in MODULES below. The module declares the section:

    SECTION = Section("embeddings", "Embeddings", PARAMS, build, warm=warm,
                      tour=("Each id selects one row of a big table ..."))   # its tour step

`build` reads the validated `state` (the prompt and this section's own parameters), runs the
pipeline, calls figure builders, and returns the template's context. It may call
`state.reject(name, message)` for a value that only turns out to be wrong once the prompt is
known (an index past the end of the prompt, say). A build that reads another section's
parameters names them: `reads=` (the Sampling section's SAMPLER, say); with
`shows_read_messages=True` its answer shows their messages too. The page, the section's own route
`/section/<id>`, the header nav, the tour and the validation of its parameters all come from
`sections()`, read when a request comes; nothing else needs to change.
"""
import importlib
import sys

from web.core.params import PROMPT
from web.presentation.overview import PARAMS as OVERVIEW_PARAMS
from web.presentation.overview import SAMPLER_NAMES as OVERVIEW_SAMPLER
from web.presentation.tour import PAGE_PARAMS

# The section modules (web/sections/<name>.py), in page order: adding a section adds one line.
MODULES = (
    "tokenization",
    "embeddings",
    "positions",
    "block",
    "attention",
    "feedforward",
    "logits",
    "sampling",
    "decoding",
    "generation",
    "chat",
    "kvcache",
    "batching",
    "quantization",
    "speculative",
    "tiling",
    "roofline",
)


def sections() -> tuple:
    """The registered sections, in page order: each module's SECTION, for the names MODULES
    holds when asked (so that a test can register one more by adding its name to MODULES).
    A request asks some 40 times: the modules already imported are read from sys.modules."""
    names = [f"web.sections.{name}" for name in MODULES]
    loaded = [sys.modules.get(name) for name in names]
    if None in loaded:
        loaded = [importlib.import_module(name) for name in names]
    return tuple(module.SECTION for module in loaded)


SECTIONS = sections()       # as the app starts (the tests parametrize over it)


def all_params() -> list:
    """The prompt, the page's own (tour, presentation mode, theme), the overview's
    (web/presentation/overview.py), then every section's parameters, in page order; names must be
    unique."""
    params = [PROMPT, *PAGE_PARAMS, *OVERVIEW_PARAMS] + [p for s in sections() for p in s.params]
    names = [p.name for p in params]
    assert len(names) == len(set(names)), f"duplicate parameter names in {names}"
    return params


def section(section_id: str):
    return next((s for s in sections() if s.id == section_id), None)


# --- a section that reads another's parameters follows its changes ---------------------------
# When one of a section's own controls changed, its answer names an event (views.section:
# HX-Trigger, fired as the answer arrives) if any section's build reads that section's
# parameters (`reads`); a reader follows it through an element whose hx-trigger is
# refresh_trigger(reader) (decoding's samples do).

def changed_event(section_id: str) -> str:
    return f"{section_id}-changed"


def owners(names) -> list:
    """The sections owning any of these parameter names."""
    names = set(names)
    return [s for s in sections() if names & {p.name for p in s.params}]


def readers(s) -> list:
    """The sections whose build reads one of section s's own parameters."""
    own = {p.name for p in s.params}
    return [t for t in sections() if own & set(t.reads)]


def followers_of(s) -> list:
    """What follows a change of section s's own parameters: its readers, and the overview
    (OVERVIEW: its live part) when s owns the page's sampler shown there."""
    owns_sampler = set(OVERVIEW_SAMPLER) & {p.name for p in s.params}
    return readers(s) + ([OVERVIEW] if owns_sampler else [])


def sampler_followers() -> list:
    """The sections that follow the overview's sampler controls: the one owning the sampler's
    parameters (Sampling) and those reading them."""
    names = set(OVERVIEW_SAMPLER)
    return [s for s in sections() if names & ({p.name for p in s.params} | set(s.reads))]


OVERVIEW = "overview"      # the overview follows the sampler too, through its live part

# The overview's sampler controls set the Sampling section's parameters (the page's one sampler):
# its answer names this event, which the Sampling section and every reader of the sampler follow.
SAMPLER_MOVED = "sampler-moved"


def refresh_trigger(s) -> str:
    """The hx-trigger through which section s follows the sections whose parameters it reads:
    "<owner>-changed from:body" for each ("" when it reads none), and the overview's
    SAMPLER_MOVED for a reader of the page's sampler."""
    events = [changed_event(o.id) for o in owners(s.reads)]
    if set(s.reads) & set(OVERVIEW_SAMPLER):
        events.append(SAMPLER_MOVED)
    return ", ".join(f"{e} from:body" for e in events)
