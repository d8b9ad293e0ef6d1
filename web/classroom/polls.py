"""The class polls: every predict-then-reveal question of the page, asked of the whole class.

A poll is opened on the teacher's screen as it is (the teacher's page state, a query string):
its question and the model's answer come from the section's own build for that state
(`web.core.cache.cached_build(section, lm, state)`, the very call that renders the section), so the
model's side of a reveal is the number the section shows, never typed. The model's answer is
kept in the store with the poll and sent to nobody until the teacher reveals it.

    kind            section         the class answers       the model's answer (build context)
    next-token      logits          a word (text)           rows[0]: the top next token
    top-prob        logits          a percentage            rows[0].p1: its probability
    n-tokens        tokenization    a whole number          the prompt's token count
    top-p-half      sampling        a whole number          half.kept (a Nucleus)
    beam-vs-greedy  decoding        one of four choices     verdict
    kv-bytes        kvcache         a whole number          final_nbytes

On reveal, the class's answers are counted beside the model's. For the next token, the class's
guesses are drawn against the model's probabilities on the same axis
(web.model_state.forward.prompt_run's
last row of logits through pipeline.sampling.softmax_with_temperature at T = 1, as the logits
section computes it), with the probability the model gave the class's favourite guess.
"""
import decimal
import math
import re
import statistics
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np

from pipeline.sampling import softmax_with_temperature
from web.core.cache import memoized
from web.core.limits import CLASSROOM
from web.figures import ROLES, base_layout, label, roles
from web.model_state.forward import prompt_ids, prompt_run

# the reveal's chart: the class's guesses are what was observed (DRAWS, as the sampling
# section's draws), the model's bars its softmax probability (MODEL_P)
ROLE_OF_BAR = {"class": "DRAWS", "model": "MODEL_P"}
TOP_GROUPS = 10            # answers drawn / listed on reveal
MAX_NUMBER = 10 ** 15


class PollError(ValueError):
    """A poll that cannot be opened, or an answer that is not valid (422 with the message)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def last_words(prompt: str, n: int = 8) -> str:
    words = prompt.split()
    return ("… " if len(words) > n else "") + " ".join(words[-n:])


def _next_token(lm, state, ctx):
    top = ctx["rows"][0]                      # web.sections.logits.Row
    return dict(question="Which token will the model rank first after "
                         f"“{last_words(state['prompt'])}”? Type it.",
                answer=top.text.replace("·", " ").strip(), shown=top.text,
                top_id=top.id, top_p=top.p1)


def _top_prob(lm, state, ctx):
    top = ctx["rows"][0]
    pct = round(100 * top.p1, 1)
    return dict(question=f"The model's first choice after “{last_words(state['prompt'])}” is "
                         f"“{top.text.replace('·', ' ').strip()}”. How probable does the "
                         "model think it is, in percent?",
                answer=pct, shown=f"{pct:g}%", min=0, max=100,
                exact=100 * float(top.p1), decimals=1)


def _n_tokens(lm, state, ctx):
    n = len(prompt_ids(lm, state["prompt"]))
    return dict(question=f"Into how many tokens does {lm.name}'s tokenizer cut the prompt "
                         f"({len(state['prompt']):,} characters)?",
                answer=n, shown=f"{n:,} tokens", min=0, max=10 ** 6, whole=True)


def _top_p_half(lm, state, ctx):
    # web.presentation.distribution.Distribution: the model's own
    n = ctx["model"].probs.size
    kept, mass = ctx["half"]                  # what top-p = 0.5 alone keeps (kept, mass)
    return dict(question=f"Top-p = 0.5 alone keeps the most probable tokens until they hold half "
                         f"of the probability. Of the {n:,} tokens, how many does it keep for "
                         "this prompt?",
                answer=kept, shown="{:,} kept (holding {:.1%}); {:,} removed".format(
                    kept, mass, n - kept), min=0, max=n, whole=True)


def _beam_vs_greedy(lm, state, ctx):
    if ctx.get("full"):
        raise PollError("The prompt fills the model's context window: there is no beam search "
                        "to ask about.")
    width, n_new = ctx["width"], ctx["n_new"]
    return dict(question=f"With {width} beam{'s' if width != 1 else ''} and {n_new} new "
                         f"token{'s' if n_new != 1 else ''}, next to greedy's continuation, the "
                         "best beam will be…",
                answer=ctx["verdict"], choices=list(ctx["verdicts"]),
                shown="{} (total log-probability {:.3f} against greedy's {:.3f})".format(
                    ctx["verdict"], ctx["finals"][0].total, ctx["greedy"].total))


def _kv_bytes(lm, state, ctx):
    cfg = ctx["cfg"]
    return dict(question=f"Each token leaves a key and a value per key/value head in each layer. "
                         f"{ctx['model_name']}: {cfg.n_layers} layers, {cfg.n_kv_heads} kv heads "
                         f"of {cfg.head_dim} float32 numbers (4 bytes). After "
                         f"{ctx['final_tokens']} tokens, how many bytes does the cache hold?",
                answer=ctx["final_nbytes"], shown=f"{ctx['final_nbytes']:,} bytes",
                min=0, max=MAX_NUMBER, whole=True)


# Where each answer shows on the page, withheld from the class's members while its poll is open
# (web/classroom/withheld.py): the sections whose Section.gives_away names the poll's answer,
# and the places outside the sections ("overview", the page's first screen; "stream", the
# generation loop's streamed tokens). EVERYWHERE: every place of the page.
EVERYWHERE = ("*",)
# The next token and its probability also show in the overview and the streamed tokens.
NEXT_TOKEN_ELSEWHERE = ("overview", "stream")


@dataclass(frozen=True)
class PollKind:
    id: str
    section: str          # the section whose build answers it
    label: str            # the teacher's menu
    input: str            # "text", "number" or "choice"
    spec: Callable        # spec(lm, state, ctx) -> question, answer, shown (+ choices, min, max)
    answer: str           # what the answer is, as the sections' gives_away name it; "*": it
                          #   shows everywhere
    elsewhere: tuple = () # the places outside the sections that show it (above)

    @property
    def withholds(self) -> tuple:
        """The places of the page that show the answer (above)."""
        if self.answer == "*":
            return EVERYWHERE
        from web.core.registry import sections
        return (*self.elsewhere, *(s.id for s in sections() if self.answer in s.gives_away))


KINDS = {k.id: k for k in (
    PollKind("next-token", "logits", "The next token", "text", _next_token, "next-token",
             NEXT_TOKEN_ELSEWHERE),
    PollKind("top-prob", "logits", "How probable is the top token?", "number", _top_prob,
             "next-token", NEXT_TOKEN_ELSEWHERE),
    # every section draws the prompt's tokens: their count is everywhere but the prompt box
    PollKind("n-tokens", "tokenization", "How many tokens is the prompt?", "number", _n_tokens,
             "*"),
    PollKind("top-p-half", "sampling", "What top-p 0.5 keeps", "number", _top_p_half,
             "next-token", NEXT_TOKEN_ELSEWHERE),
    PollKind("beam-vs-greedy", "decoding", "Does beam search beat greedy?", "choice",
             _beam_vs_greedy, "beam-vs-greedy"),
    PollKind("kv-bytes", "kvcache", "The KV cache's bytes", "number", _kv_bytes, "kv-bytes"),
)}


def open_spec(kind: PollKind, lm, state, ctx) -> dict:
    """What the store keeps of a new poll: the question and its form (public) and the model's
    answer (sent only after the reveal), with the model and prompt it was computed for."""
    s = kind.spec(lm, state, ctx)
    return dict(kind=kind.id, label=kind.label, input=kind.input, question=s["question"],
                choices=s.get("choices"), min=s.get("min"), max=s.get("max"),
                whole=s.get("whole", False), withholds=list(kind.withholds),
                model=lm.key, prompt=state["prompt"],
                answer=s["answer"], shown=s["shown"],
                top_id=s.get("top_id"), top_p=s.get("top_p"),
                exact=s.get("exact"), decimals=s.get("decimals", 0))


PUBLIC = ("kind", "label", "input", "question", "choices", "min", "max", "whole", "withholds")


def public(spec: dict) -> dict:
    """The poll as students see it before the reveal: no answer."""
    return {k: spec.get(k) for k in PUBLIC}


# --- answers ---------------------------------------------------------------------------------

def validate(spec: dict, raw) -> str:
    """The answer as stored (text), or PollError: text up to CLASSROOM["answer_chars"]
    characters of visible text, a number within the poll's range (read by read_number), or one
    of its choices."""
    if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
        raise PollError("Send an answer.")
    text = str(raw).strip()
    if not text:
        raise PollError("The answer is empty.")
    if len(text) > CLASSROOM["answer_chars"]:
        raise PollError(f"An answer is at most {CLASSROOM['answer_chars']} characters; this one "
                        f"is {len(text)}.")
    hidden = invisible(text)
    if hidden:
        raise PollError(f"The answer holds {hidden}, which cannot be seen or changes the "
                        "direction of the text; only visible text is taken.")
    if spec["input"] == "choice":
        if text not in spec["choices"]:
            raise PollError(f"Choose one of: {', '.join(spec['choices'])}.")
        return text
    if spec["input"] == "number":
        whole = spec.get("whole", False)
        value = read_number(text, whole)
        if whole and value != int(value):
            raise PollError(f"The answer is a whole number; “{text}” reads as {value:g}.")
        if not spec["min"] <= value <= spec["max"]:
            raise PollError(f"The answer must be a number from {spec['min']:,} to "
                            f"{spec['max']:,}.")
        return f"{value:g}" if value != int(value) or abs(value) >= 1e15 else str(int(value))
    return text


# --- what an answer may hold ------------------------------------------------------------------
# Invisible and direction-control characters are refused: a right-to-left override (U+202E)
# shows a guess backwards on the projector, a zero-width space makes two equal-looking guesses
# count apart, U+0085 is a line break. Unicode's categories name them: controls (Cc), format
# characters (Cf: zero-width, direction marks and overrides, tags), line and paragraph
# separators, surrogates, private use and unassigned code points. Two format characters are
# part of visible text and pass in their place: the zero-width joiner inside an emoji sequence
# (👩‍💻), and the zero-width non-joiner between letters (Persian, Indic scripts).
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}
ZWJ, ZWNJ = "\u200d", "\u200c"


def _pictographic(ch: str) -> bool:
    return unicodedata.category(ch) in ("So", "Sk") or "\ufe00" <= ch <= "\ufe0f" or \
        "\U0001f3fb" <= ch <= "\U0001f3ff"        # symbols, variation selectors, skin tones


def invisible(text: str):
    """The first invisible or direction-control character of `text`, named ("U+202E
    RIGHT-TO-LEFT OVERRIDE"), or None."""
    for i, ch in enumerate(text):
        if unicodedata.category(ch) not in _HIDDEN:
            continue
        before, after = text[i - 1:i], text[i + 1:i + 2]
        if ch == ZWJ and before and after and _pictographic(before) and _pictographic(after):
            continue
        if ch == ZWNJ and before.isalpha() and after.isalpha():
            continue
        if "\U000e0020" <= ch <= "\U000e007f" and "\U0001f3f4" in text[:i]:
            continue                                   # the tags of a flag (🏴 + tags)
        return f"U+{ord(ch):04X} {unicodedata.name(ch, 'an unnamed character')}"
    return None


# Numbers are typed as people write them. Documented forms (the poll's hint says the same):
# digits with a decimal point or a decimal comma ("77.3", "77,3"), thousands grouped by commas
# ("86,016"), spaces or apostrophes ("86 016", "86'016"), a trailing %, an exponent ("8.6e4").
# In a poll whose answer is a whole number (a count of tokens or bytes) a comma before exactly
# three digits groups thousands; in a poll of a decimal (a percentage), a lone comma is the
# decimal comma. Anything else ("1_000", "1.2.3", "12abc") is refused with a message, never
# guessed at.
_GROUPED = re.compile(r"([+-]?)(\d{1,3}(?:([,' \u00a0\u2009\u202f])\d{3})(?:\3\d{3})*)"
                      r"(?:\.(\d+))?")
_PLAIN = re.compile(r"([+-]?)(\d*)(?:([.,])(\d*))?(?:[eE]([+-]?\d{1,3}))?")


def _digits(text: str) -> str:
    """Any script's decimal digits as ASCII ("١٢" -> "12"); other characters unchanged."""
    return "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in text)


def read_number(text: str, whole: bool) -> float:
    """The number `text` means (see above), or PollError saying why it is not one."""
    t = _digits(text.strip())
    if t.endswith("%"):
        t = t[:-1].rstrip()
    m = _GROUPED.fullmatch(t)
    if m and not (m.group(3) == "," and not whole and t.count(",") == 1 and not m.group(4)):
        value = float(m.group(1) + re.sub(r"\D", "", m.group(2)) +
                      ("." + m.group(4) if m.group(4) else ""))
    else:
        m = _PLAIN.fullmatch(t)
        if not m or not (m.group(2) or m.group(4)):
            bad = sorted({c for c in t if not (c.isdigit() or c in "+-.,eE")})
            why = (f": “{' '.join(bad)}” is not part of a number" if bad else "")
            raise PollError(f"“{text}” is not a number{why}. Type digits, with a decimal point "
                            "or comma (77.3 or 77,3) and, for thousands, commas or spaces "
                            "(86,016 or 86 016).")
        value = float(f"{m.group(1)}{m.group(2) or '0'}.{m.group(4) or '0'}"
                      f"e{m.group(5) or '0'}")
    if not math.isfinite(value):
        raise PollError(f"“{text}” is not a finite number.")
    return value


def norm(text: str) -> str:
    """A guess as it is compared: compatibility forms folded (full-width ｍａｎ is man), case
    ignored, spaces around it dropped."""
    return unicodedata.normalize("NFKC", text).strip().casefold()


@memoized(4)
def readings(lm) -> dict:
    """Each token's text as a guess reads (stripped, lower case) -> the token ids that read so
    (" wife" and "wife" are one guess); computed once per model."""
    out = {}
    tok = lm.tokenizer
    for i in range(lm.model.config.vocab_size):
        try:
            text = tok.decode([i])
        except Exception:          # an id with no bytes (a reserved slot)
            continue
        key = norm(text)
        if key:
            out.setdefault(key, []).append(i)
    return out


def class_groups(answers: list, numeric: bool) -> list:
    """[(shown text, count)] of the answers, most common first; text answers are grouped
    regardless of case and spaces around them (shown as most of the class spelled them)."""
    if numeric:
        counts = Counter(answers)
        return sorted(counts.items(), key=lambda kv: (-kv[1], float(kv[0])))
    spellings = {}
    for a in answers:
        spellings.setdefault(norm(a), Counter())[a.strip()] += 1
    groups = [(c.most_common(1)[0][0], sum(c.values())) for c in spellings.values()]
    return sorted(groups, key=lambda kv: (-kv[1], kv[0]))


def decimals_of(text: str) -> int:
    """The decimal places a number is written with ("77" 0, "77.3" 1, "1e-3" 3)."""
    exponent = decimal.Decimal(text).as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def number_right(text: str, spec: dict) -> bool:
    """A numeric answer is right when it is the model's value at the precision it is written
    with, never asked finer than the value shown: within half a unit of its own last decimal
    place, or of the shown value's (spec["decimals"]) if that is coarser, of the model's exact
    value (spec["exact"], else the answer). The model's 77.25% (shown "77.3%"): 77, 77.3 and
    77.25 are right, 77.2 and 78 are not. A whole-number poll (decimals 0, whole guesses) is
    right only when equal."""
    exact = spec.get("exact")
    exact = float(spec["answer"] if exact is None else exact)
    places = min(decimals_of(text), int(spec.get("decimals") or 0))
    return abs(float(text) - exact) <= 0.5 * 10.0 ** -places + 1e-9 * max(1.0, abs(exact))


def reveal(spec: dict, answers: list, lm=None, joined=None) -> dict:
    """The class beside the model: counts of the answers, which were right, and for the next
    token the model's probability of each guess and the figure of both on one axis (lm: the
    model the poll was opened on; needed for the next token only)."""
    numeric = spec["input"] == "number"
    total = len(answers)
    groups = class_groups(answers, numeric)
    answer = spec["answer"]
    rows = []
    for text, count in groups:
        right = number_right(text, spec) if numeric else norm(text) == norm(str(answer))
        rows.append(dict(answer=text, count=count, share=count / total, right=right))
    out = dict(kind=spec["kind"], question=spec["question"], model=spec["shown"],
               model_answer=answer, total=total, joined=joined,
               right=sum(r["count"] for r in rows if r["right"]),
               groups=rows[:TOP_GROUPS], others=max(0, len(rows) - TOP_GROUPS))
    if numeric and spec.get("decimals"):
        out["right_means"] = ("right: the model's value at the precision the guess is written "
                              f"with, to at most {spec['decimals']} decimal place"
                              f"{'s' if spec['decimals'] != 1 else ''}")
    if numeric and answers:
        values = [float(a) for a in answers]
        med = statistics.median(values)
        out["median"] = f"{med:,.6g}"
        out["within_10"] = sum(1 for v in values
                               if abs(v - float(answer)) <= 0.1 * abs(float(answer)))
    if spec["kind"] == "next-token" and lm is not None:
        next_token_model_side(out, spec, lm)
    return out


def next_token_model_side(out: dict, spec: dict, lm):
    """The model's probability of each of the class's guesses (the tokens that read as the
    guess), the favourite's, and the figure: class share and model probability per guess."""
    logits = prompt_run(lm, spec["prompt"]).next_logits
    p1 = softmax_with_temperature(logits, 1.0)                    # as the logits section
    table = readings(lm)
    for g in out["groups"]:
        ids = table.get(norm(g["answer"]))
        g["p"] = float(p1[ids].sum(dtype=np.float64)) if ids else None
    top_text = spec["answer"]
    out["model_p"] = spec["top_p"]
    if out["groups"]:
        fav = out["groups"][0]
        out["favourite"] = dict(answer=fav["answer"], share=fav["share"], p=fav["p"])
    xs = [g["answer"] for g in out["groups"]]
    class_y = [g["share"] for g in out["groups"]]
    model_y = [g["p"] or 0.0 for g in out["groups"]]
    if norm(top_text) not in {norm(x) for x in xs}:
        xs.append(top_text)
        class_y.append(0.0)
        ids = table.get(norm(top_text)) or [spec["top_id"]]
        model_y.append(float(p1[ids].sum(dtype=np.float64)))
    names = [label(x) for x in xs]
    hover = [("" if g is None or g.get("p") is not None else " (not one token of this model)")
             for g in out["groups"]] + [""] * (len(xs) - len(out["groups"]))
    out["figure"] = dict(
        data=[dict(type="bar", name="the class: share of guesses", x=names, y=class_y,
                   marker=dict(color=ROLES[ROLE_OF_BAR["class"]]),
                   meta=roles(ROLE_OF_BAR["class"]),
                   hovertemplate="%{x}: %{y:.0%} of the class<extra></extra>"),
              dict(type="bar", name=f"{spec['model']}: probability", x=names, y=model_y,
                   marker=dict(color=ROLES[ROLE_OF_BAR["model"]]),
                   meta=roles(ROLE_OF_BAR["model"]), customdata=hover,
                   hovertemplate="%{x}: p = %{y:.1%}%{customdata}<extra></extra>")],
        layout=base_layout(
            title=dict(text="The class's guesses and the model's probabilities"),
            barmode="group", height=340,
            # the legend names the two bars; a long axis title ran into a title wrapped on
            # two lines (a phone, the projector's larger type)
            yaxis=dict(title=dict(text="share, p"), range=[0, 1],
                       tickformat=".0%"),
            xaxis=dict(type="category", tickangle=0),
            legend=dict(orientation="h", y=-0.2)))
