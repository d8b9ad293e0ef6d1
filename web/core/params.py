"""Every query parameter of the page, parsed and validated in one place.

All state (the prompt, every slider and choice) lives in the query string, so a reload, the back
button or a shared link shows exactly what was on screen. Each view calls `parse_state`; a bad
value never raises: it is recorded in `state.errors` (shown next to its control, with a 4xx
status) and the parameter falls back to its default.
"""
import re
import urllib.parse
from collections import ChainMap
from dataclasses import dataclass, field
from types import MappingProxyType

from web.core.limits import INT_DIGITS, LIMITED, LIMITS, MAX_QUERY_BYTES, Deadline, cap

_INT = re.compile(r"[+-]?[0-9]{1,%d}" % INT_DIGITS)
_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,9}(?:\.[0-9]{0,9})?|\.[0-9]{1,9})")  # no exponent, nan, inf
# Control characters other than tab, newline and carriage return: NUL and other binary.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
MAX_CHOICES_LISTED = 16     # a refused value's message lists at most this many choices


class ParamError(ValueError):
    """A query value that cannot be used; `status` is 400 (malformed) or 422 (out of range)."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Param:
    """One query parameter: its name in the URL, the label of its control, its rules."""
    name: str
    label: str
    kind: str = "text"                 # "text", "int" or "float"
    default: object = None             # None: the section computes it from the other values
    min: int = None                    # ints and floats: inclusive range
    max: int = None
    max_chars: int = None              # text: most characters (code points)
    required: bool = False             # text: must not be empty after stripping whitespace
    resets_with_prompt: bool = False   # meaningless for another prompt: dropped when it changes
    limit: str = None                  # a name in web.core.limits.LIMITS: the server's cap on `max`
    # the default for a big model (web.model_state.loaded.LoadedModel.big),
    big_default: object = None
                                       #   where `default` would make the section too slow
    choices: tuple = None              # the only values accepted, in the order a select shows
                                       #   them; for ints and floats min and max default to
                                       #   their smallest and largest
    min_open: bool = False             # ints and floats: `min` itself is refused (an open
                                       #   lower bound, e.g. top-p > 0)
    min_why: str = None                # why `min` is refused, said in the message

    def __post_init__(self):
        # The server's caps (web/core/limits.py): a section cannot ask for more than the table
        # allows,
        # and free text is never longer than text_chars.
        if self.limit is None and self.name in LIMITED:
            object.__setattr__(self, "limit", LIMITED[self.name])
        if self.limit is not None:
            object.__setattr__(self, "max", cap(self.limit, self.max))
        if self.kind == "text" and self.max_chars is None:
            object.__setattr__(self, "max_chars", LIMITS["text_chars"])
        if self.choices is not None:
            object.__setattr__(self, "choices", tuple(self.choices))
            if self.kind in ("int", "float"):
                if self.min is None:
                    object.__setattr__(self, "min", min(self.choices))
                if self.max is None:
                    object.__setattr__(self, "max", max(self.choices))

    def choice_message(self, value, choices=None) -> str:
        """The message for a value that is not one of `choices` (default: the Param's); a long
        list (a model's matrices) is named by its first few and its last."""
        shown = _shorten(value) if isinstance(value, str) else value
        names = [str(c) for c in (choices or self.choices)]
        if len(names) > MAX_CHOICES_LISTED:
            names = names[:3] + ["…", f"{names[-1]} ({len(names)} in all)"]
        return f"{self.label} must be one of {', '.join(names)}; got {shown!r}."

    def parse(self, raw: str):
        if self.kind == "int":
            value = self._parse_int(raw)
        elif self.kind == "float":
            value = self._parse_float(raw)
        else:
            value = self._parse_text(raw)
        if self.choices is not None and value not in self.choices:
            raise ParamError(self.choice_message(value))
        return value

    def _check_open_min(self, value, shown: str):
        if self.min_open and value == self.min:
            why = f" ({self.min_why})" if self.min_why else ""
            raise ParamError(f"{self.label} must be greater than {shown}{why}; got {shown}.")

    def _parse_int(self, raw: str) -> int:
        if not _INT.fullmatch(raw.strip()):
            raise ParamError(f"{self.label} must be a whole number, not {_shorten(raw)!r}.", 400)
        value = int(raw)
        if self.choices is not None:
            return value                 # parse() checks it against the choices
        self._check_open_min(value, str(value))
        low = self.min if self.min is not None else -10 ** INT_DIGITS
        high = self.max if self.max is not None else 10 ** INT_DIGITS
        if not low <= value <= high:
            why = (" (the server's limit per request)"
                   if self.limit is not None and value > high else "")
            raise ParamError(f"{self.label} must be between {low} and {high}{why}; got {value}.")
        return value

    def _parse_float(self, raw: str) -> float:
        if not _FLOAT.fullmatch(raw.strip()):
            raise ParamError(f"{self.label} must be a decimal number such as 0.7, not "
                             f"{_shorten(raw)!r}.", 400)
        value = float(raw)
        if self.choices is not None:
            return value
        self._check_open_min(value, f"{value:g}")
        if not self.min <= value <= self.max:
            raise ParamError(f"{self.label} must be between {self.min:g} and {self.max:g}; "
                             f"got {value:g}.")
        return value

    def _parse_text(self, raw: str) -> str:
        if _SURROGATE.search(raw):
            raise ParamError(f"{self.label} is not valid UTF-8 text (it holds a lone surrogate "
                             "or undecodable bytes).", 400)
        if _CONTROL.search(raw):
            raise ParamError(f"{self.label} holds a control character such as NUL; only "
                             "printable text, tabs and newlines are accepted.", 400)
        text = raw.replace("\r\n", "\n")     # a browser sends a textarea's newlines as CRLF
        if self.required and not text.strip():
            raise ParamError(f"{self.label} is empty: type some text.")
        if self.max_chars is not None and len(text) > self.max_chars:
            raise ParamError(f"{self.label} is {len(text):,} characters long; the limit is "
                             f"{self.max_chars:,}.")
        return text


def _shorten(raw: str, n: int = 20) -> str:
    return raw if len(raw) <= n else raw[:n] + "…"


PROMPT = Param("prompt", "The prompt", default=(
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a"), max_chars=LIMITS["prompt_chars"], required=True)


class Findings:
    """What can be found about the values once a section builds: a value refused (reject,
    index_within, one_of), a default worked out (resolve). Written into the object's own
    `values`, `errors`, `statuses` and `computed` mappings: the request's State's while the
    query is parsed, a Query's Outcome while a section builds."""

    def __getitem__(self, name):
        return self.values[name]

    def reject(self, name: str, message: str, status: int = 422):
        """Record a problem found later (e.g. an index past the end of this prompt's words)."""
        self.errors[name] = message
        self.statuses[name] = status
        self.values[name] = self.params[name].default

    def index_within(self, name: str, n: int, what: str, where: str = "this prompt has",
                     things: str = None, default=None) -> int:
        """The index parameter `name` if it is below n, else its default with the message
        "<What> <i> does not exist: <where> <n> <things> (0 to <n - 1>)." (things: what + "s").

        `default` is the value the section works out when the parameter has none of its own
        (see resolve); without it the Param's default is used."""
        value = self.values[name] if default is None else self.resolve(name, default)
        if value < n:
            return value
        self.reject(name, f"{what[:1].upper()}{what[1:]} {value} does not exist: {where} {n} "
                    f"{things or what + 's'} (0 to {n - 1}).")
        return self.values[name] if default is None else self.resolve(name, default)

    def one_of(self, name: str, choices):
        """The value of `name` if it is one of `choices`, a set known only once the model is
        (a Param's fixed `choices` are checked when the query is parsed); else its default,
        with the message of a value outside a Param's choices."""
        choices = tuple(choices)
        if self.values[name] not in choices:
            self.reject(name, self.params[name].choice_message(self.values[name], choices))
        return self.values[name]

    def resolve(self, name: str, value):
        """Fill in a default the section computed (it is left out of the canonical URL)."""
        self.computed[name] = value
        if self.values[name] is None:
            self.values[name] = value
        return self.values[name]


@dataclass
class State(Findings):
    """The validated values of every parameter, the raw strings given, and what was wrong."""
    params: dict                                  # name -> Param, in page order
    values: dict = field(default_factory=dict)    # name -> valid value (or the default)
    raw: dict = field(default_factory=dict)       # name -> string as given in the query
    errors: dict = field(default_factory=dict)    # name -> message for the page
    statuses: dict = field(default_factory=dict)  # name -> 400 / 422
    computed: dict = field(default_factory=dict)  # name -> default worked out by a section

    def shown(self, name: str) -> str:
        """What a control should display: the value, or the rejected input made printable."""
        if name in self.errors and name in self.raw:
            return _CONTROL.sub("\ufffd", _SURROGATE.sub("\ufffd", self.raw[name]))
        value = self.values[name]
        return "" if value is None else str(value)

    @property
    def status(self) -> int:
        return max(self.statuses.values(), default=200)

    def status_of(self, names) -> int:
        """The status for an answer that shows only these parameters' messages."""
        return max((self.statuses[n] for n in names if n in self.statuses), default=200)

    def query_string(self) -> str:
        """The canonical query: valid values that were given and differ from the default."""
        pairs = [(name, str(self.values[name])) for name in self.params
                 if name in self.raw and name not in self.errors
                 and self.values[name] != self.params[name].default
                 and self.values[name] != self.computed.get(name, self.params[name].default)]
        return urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)

    def url(self, path: str = "/") -> str:
        qs = self.query_string()
        return f"{path}?{qs}" if qs else path


@dataclass
class Outcome:
    """What one section's build found about the values (see Findings): the values it refused
    or worked out, their messages and statuses. Cached with the build's context and applied to
    the State of every request the cached entry answers, so each shows the same messages."""
    values: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    statuses: dict = field(default_factory=dict)
    computed: dict = field(default_factory=dict)

    def apply(self, state: State):
        for name in ("values", "errors", "statuses", "computed"):
            getattr(state, name).update(getattr(self, name))


class Query(Findings):
    """What a section's build reads: the request's values, raw strings and messages,
    read-only, and the time budget it builds in (`deadline`: the request's, web.core.request_state;
    the State is the values alone). What the build finds (Findings: a refused value, a
    worked-out default) goes to `outcome`, never to the request's State; reading a value
    afterwards sees it, as the rest of the build must (a refused index reads as its default)."""

    def __init__(self, state: State, deadline: Deadline = None):
        self.outcome = Outcome()
        self.params = MappingProxyType(state.params)
        self.raw = MappingProxyType(state.raw)
        self.deadline = Deadline() if deadline is None else deadline
        # reads fall through to the request's values; writes go to the outcome's
        for name in ("values", "errors", "statuses", "computed"):
            setattr(self, name, ChainMap(getattr(self.outcome, name), getattr(state, name)))

    def check_time(self, name: str):
        """Call inside a loop whose length the control `name` sets: past the time budget
        (web.core.limits.REQUEST_SECONDS) it raises OverBudget, and the view shows the message next
        to that control and rebuilds the section with its default."""
        self.deadline.check(name)

    def in_time(self, name: str, steps):
        """The items of the iterable `steps`, the time budget checked before each (check_time):
        a loop whose length the control `name` sets."""
        for item in steps:
            self.check_time(name)
            yield item


def parse_query_string(query: bytes) -> list:
    """(name, value) pairs; bytes that are not UTF-8 survive as lone surrogates, to be refused."""
    # Raw (not percent-encoded) non-ASCII bytes are encoded first so that both forms decode alike.
    query = re.sub(rb"[\x80-\xff]", lambda m: b"%%%02X" % m.group()[0], query)
    return urllib.parse.parse_qsl(query.decode("ascii"), keep_blank_values=True,
                                  encoding="utf-8", errors="surrogateescape")


def parse_state(query: bytes, params: list) -> State:
    """Validate every known parameter of `query`; unknown names are ignored."""
    state = State({p.name: p for p in params})
    state.values = {p.name: p.default for p in params}
    if len(query) > MAX_QUERY_BYTES:
        state.reject(params[0].name, f"The address is too long ({len(query):,} bytes; the "
                     f"limit is {MAX_QUERY_BYTES:,}).", 400)
        return state
    seen = {}
    for name, raw in parse_query_string(query):
        if name in state.params:
            seen.setdefault(name, []).append(raw)
    for name, raws in seen.items():
        param = state.params[name]
        state.raw[name] = raws[0]
        # the same value twice is one value: the page's sampler has controls in two places
        # (the overview and the Sampling section) that share its names and are kept equal
        if len(set(raws)) > 1:
            state.reject(name, f"{param.label} is given {len(raws)} times in the address, with "
                         "different values; give it once.", 400)
            continue
        try:
            state.values[name] = param.parse(raws[0])
        except ParamError as e:
            state.reject(name, e.message, e.status)
    return state
