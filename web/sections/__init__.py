"""One module per section of the explainer: its parameters, its `build(lm, state)` and, last,
its `SECTION = Section(...)`, which web/core/registry.py lists in page order.

lm is the loaded model (web.model_state.loaded.LoadedModel; lm.model is the pipeline model).
state is the request read through a web.core.params.Query, whose reject / resolve / index_within
/ one_of record what the build finds in an Outcome instead of changing the request."""
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Section:
    id: str                 # HTML id, route /section/<id>, nav anchor
    title: str              # heading, nav label and tour step title
    params: tuple           # the Params this section owns (the prompt is shared by all)
    build: Callable         # build(lm, state) -> template context (a dict); lm: the loaded
                            #   model, lm.model the pipeline model; state: a read-only
                            #   web.core.params.Query (its findings: an Outcome, cached with the
                            #   context by web.core.cache.cached_build)
    tour: str = field(kw_only=True)   # the text of its step in the guided tour (required)
    warm: Callable = field(default=None, kw_only=True)
                            # warm(lm): fill prompt-independent caches and make its timing
                            #   measurements; web/serving/server.py runs it once, in the process
                            #   that loaded the model, before the workers are forked (one
                            #   process: in a background thread at start); None: nothing to warm
    reads: tuple = field(default=(), kw_only=True)
                            # names of other sections' parameters its build reads: they key its
                            #   cached result (web.core.cache.cached_build), and the sections owning
                            #   them name an event it can follow (web.core.registry.refresh_trigger)
    gives_away: tuple = field(default=(), kw_only=True)
                            # the class polls' answers it shows (web/classroom/polls.py PollKind
                            #   answer: "next-token", "kv-bytes", ...): a class member does not
                            #   see it while such a poll is open
    shows_read_messages: bool = field(default=False, kw_only=True)
                            # its answer shows the messages of the parameters it reads too, so
                            #   they count in its status (else only its own and the prompt's do)
    template: str = field(default=None, kw_only=True)
                            # partial template, used by the page and as the htmx swap;
                            #   None: templates/sections/<id>.html
    short: str = field(default=None, kw_only=True)
                            # its name in the overview's slim map of the path; None: the title
    shorter: str = field(default=None, kw_only=True)
                            # the map's name on a narrow screen (static/style.css); None: the
                            #   map's name there too

    def __post_init__(self):
        if self.template is None:
            object.__setattr__(self, "template", f"sections/{self.id}.html")

    def map_names(self) -> tuple:
        """(name, narrow name or None) of its entry in the overview's slim map."""
        return self.short or self.title, self.shorter

    def shown(self) -> list:
        """The parameter names whose messages its answer shows, besides the prompt's: those it
        reads when shows_read_messages, then its own."""
        return [*(self.reads if self.shows_read_messages else ())] + [p.name for p in self.params]
