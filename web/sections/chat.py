"""A chat, as the model reads it: the question (and a system message) put through the model file's
own chat template, the text and special tokens that makes, the ids, and the answer streamed by
the generation loop until the model writes its end-of-turn token.

The rendering is pipeline/chat.py (transformers' apply_chat_template, checked against it by
tests/test_chat.py); the stream is web/serving/chat_stream.py, the generation stream's own loop
(web.serving.streaming.answer_events) on these ids, greedy or drawn by the page's one sampler
(the Sampling section's settings and seed: web/core/sampler_settings.py), as chat_choose says.
A model whose files carry no chat template (the project's Austen model: a base model trained on
novels) gets that said, not an error.
"""
import urllib.parse

from pipeline.chat import (
    ChatTemplateError,
    chat_template_of,
    encode_chat,
    render_chat,
    special_texts,
    special_tokens,
    specials_in,
    split_special,
)
from web.core.cache import memo
from web.core.params import Param
from web.core.sampler_settings import CHOOSERS, described
from web.model_state.measured import model_key
from web.presentation.tokens import token_pieces
from web.sections import Section
from web.sections.sampling import SAMPLER

MAX_NEW_TOKENS = 200       # the stream's most (as the generation loop's)
CHAT_CHARS = 600           # a question or a system message: a few sentences

PARAMS = (
    Param("chat_q", "Your question", default="What is the capital of France?",
          max_chars=CHAT_CHARS, required=True),
    Param("chat_sys", "System message (optional)", default="", max_chars=CHAT_CHARS),
    Param("chat_max", "New-token limit", kind="int", default=60, min=1, max=MAX_NEW_TOKENS,
          limit="new_tokens"),
    Param("chat_choose", "Each token is", default="greedy", choices=CHOOSERS),
)


class ChatInputError(ValueError):
    """A question or system message the chat cannot take: (parameter name, message)."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name, self.message = name, message


def messages_of(question: str, system: str) -> list:
    """The conversation: the system message when one is typed, then the question."""
    out = [{"role": "system", "content": system}] if system.strip() else []
    return out + [{"role": "user", "content": question}]


_chats = memo("chat renderings", 32)


def chat_of(lm, question: str, system: str) -> dict:
    """The conversation rendered and encoded: {"messages", "text", "ids", "template",
    "specials"}; None when the model has no chat template; ChatInputError for text the chat
    refuses (a special token's text typed in a message: the tokenizer would read it as the
    token itself, a turn ended or begun by the user)."""
    template = chat_template_of(lm.model)
    if template is None:
        return None
    specials = special_texts(lm.tokenizer)
    for name, text in (("chat_q", question), ("chat_sys", system)):
        found = list(dict.fromkeys(specials_in(text, specials)))
        if found:
            what = "the text of one of this model's special tokens" if len(found) == 1 else \
                "texts of this model's special tokens"
            raise ChatInputError(name, (
                f"{'The question' if name == 'chat_q' else 'The system message'} holds "
                f"{' and '.join(found)}, {what} (id{'s' if len(found) > 1 else ''} "
                f"{', '.join(str(specials[t]) for t in found)}). The tokenizer would read it as "
                "the token, not as text (transformers does too, unless asked to sanitize), so a "
                "message could end its turn or start another: remove it."))
    messages = messages_of(question, system)

    def make():
        text = render_chat(template, messages, add_generation_prompt=True,
                           **special_tokens(lm.model))
        return dict(messages=messages, text=text, ids=encode_chat(lm.tokenizer, text),
                    template=template, specials=specials)
    try:
        return _chats.get((model_key(lm.model), question, system), make)
    except ChatTemplateError as e:
        raise ChatInputError("chat_q", f"The model's chat template refused this conversation: "
                                       f"{e}") from None


def text_pieces(text: str) -> list:
    """(kind, text) of rendered text that is not a special token: a newline is a mark and a real
    line break; other invisible or direction-changing characters are marks (U+XXXX)."""
    out = []
    for ch in text:
        if ch == "\n":
            kind, shown = "newline", "\u21b5"
        elif ch == "\t":
            kind, shown = "tab", "\u2192"
        elif not ch.isprintable():
            kind, shown = "control", f"U+{ord(ch):04X}"
        else:
            kind, shown = "text", ch
        if kind == "text" and out and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + shown)
        else:
            out.append((kind, shown))
    return out


class Chip:
    """What macros.chip draws: a token's id and its text as pieces; `special` marks a special
    token's chip."""

    def __init__(self, tokenizer, token_id: int, special: bool = False):
        self.id = token_id
        self.pieces = token_pieces(tokenizer, token_id)
        self.special = special


def stream_query(lm, state) -> str:
    """The query of /chat/stream: the conversation, the limit, the chooser and, when the page's
    sampler chooses, its settings and seed (static/chat.js sets the boxes' values at the press)."""
    sampled = [(name, str(state[name])) for name in SAMPLER] \
        if state["chat_choose"] == "sampler" else []
    return urllib.parse.urlencode([("model", lm.key), ("chat_q", state["chat_q"]),
                                   ("chat_sys", state["chat_sys"]),
                                   ("chat_max", str(state["chat_max"])),
                                   ("chat_choose", state["chat_choose"]), *sampled],
                                  quote_via=urllib.parse.quote)


def no_template_reason(lm) -> str:
    if lm.trained_on_austen:
        return ("it is a base model, trained here on Jane Austen's novels to continue text. It "
                "never saw a conversation, so it has no template that turns messages into text "
                "and no token that ends a turn: give it the opening of a sentence in the prompt "
                "box instead, and it writes on (the Generation loop section).")
    return ("its files carry no chat template (tokenizer.chat_template in a GGUF file, "
            "chat_template in a tokenizer_config.json): most likely a base model, trained to "
            "continue text rather than to answer.")


def build(lm, state) -> dict:
    """Template context for the chat section."""
    tok = lm.tokenizer
    eos = lm.model.config.eos_token_id
    choose = state["chat_choose"]
    base = dict(model_name=lm.card.title if lm.card else lm.name, model_key=lm.key,
                max_new_tokens=MAX_NEW_TOKENS, choose=choose, choosers=CHOOSERS,
                sampler=described(state), sampler_params=SAMPLER,
                stream_blocked=choose == "sampler" and any(n in state.errors for n in SAMPLER))
    for _ in range(3):        # a refused message reads as its default, which is accepted
        try:
            chat = chat_of(lm, state["chat_q"], state["chat_sys"])
            break
        except ChatInputError as e:
            state.reject(e.name, e.message)
    if chat is None:
        return dict(base, has_template=False, why=no_template_reason(lm))
    specials = chat["specials"]
    special_ids = set(specials.values())
    marked = [("special", p) if is_special else ("pieces", text_pieces(p))
              for p, is_special in split_special(chat["text"], specials)]
    ids = chat["ids"]
    eos_text = next((t for t, i in specials.items() if i == eos), None)
    start_text = "<|im_start|>" if "<|im_start|>" in specials else None
    return dict(
        base, has_template=True, template=chat["template"], messages=chat["messages"],
        marked=marked, chips=[Chip(tok, i, i in special_ids) for i in ids], n_ids=len(ids),
        n_special=sum(1 for i in ids if i in special_ids),
        has_system=any(m["role"] == "system" for m in chat["messages"]),
        default_system=not any(m["role"] == "system" for m in chat["messages"])
        and "system" in chat["text"],
        eos_id=eos, eos_text=eos_text, variables=special_tokens(lm.model),
        start_text=start_text,
        start_as_text=len(tok.encode_ordinary(start_text)) if start_text else None,
        n_ctx=lm.n_ctx, stream_query=stream_query(lm, state),
    )


SECTION = Section("chat", "A chat, as the model reads it", PARAMS, build,
                  reads=SAMPLER,
                  tour=("An instruct model is met through a chat, but it reads one text: its "
                        "file's chat template wraps every message in special tokens such as "
                        "<|im_start|> and <|im_end|>, and the model answers by continuing that "
                        "text until it writes its own end-of-turn token."))
