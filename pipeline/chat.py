"""A chat as the model reads it: the model file's chat template, rendered as transformers renders
it, and the tokens that text becomes.

An instruct model never sees "messages": its file carries a Jinja2 template
(`tokenizer.chat_template` in a GGUF file, `chat_template` in a Hugging Face
tokenizer_config.json) that turns the list of messages into one text, with special tokens such
as <|im_start|> and <|im_end|> around each turn. The model continues that text; the end of its
turn is one more special token.

Rendering follows transformers' `apply_chat_template`
(src/transformers/utils/chat_template_utils.py, `_cached_compile_jinja_template` and
`render_jinja_template`): Jinja2's ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks and the loopcontrols extension; `tojson` that does not escape HTML; the globals
`raise_exception`, `strftime_now`, `dict` and `namespace`; the variables `messages`, `tools`
(None), `documents` (None), `add_generation_prompt` and the tokenizer's special tokens
(`bos_token`, `eos_token`, `unk_token`, `pad_token`, those the file names). The text is then
encoded with no BOS added (transformers: add_special_tokens=False) and every special token's
text matched whole, as transformers' tokenizer matches its added tokens.
tests/test_chat.py compares text and ids with transformers on the SmolLM2 file.
"""
import json
import os
from datetime import datetime
from functools import lru_cache

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateError(ValueError):
    """The template refused the conversation (its raise_exception) or could not be rendered."""


def chat_template_of(model):
    """The model's chat template (its text), or None when its files carry none."""
    meta = getattr(model, "metadata", None) or {}
    if meta.get("chat_template"):
        return meta["chat_template"]
    path = getattr(model, "path", None)
    if path and os.path.isdir(path):
        cfg = os.path.join(path, "tokenizer_config.json")
        if os.path.exists(cfg):
            with open(cfg, encoding="utf-8") as f:
                template = json.load(f).get("chat_template")
            if isinstance(template, str) and template:
                return template
    return None


def token_text(tokenizer, token_id):
    """The text of one token id (a special token's name), or None for an id past the vocabulary."""
    if token_id is None:
        return None
    try:
        return tokenizer.decode_single_token_bytes(token_id).decode("utf-8")
    except (KeyError, ValueError, UnicodeDecodeError):
        return None


def special_tokens(model) -> dict:
    """The template's special-token variables, as transformers' `special_tokens_map` gives them
    for this file: bos_token, eos_token, unk_token, pad_token (those whose id the file names)."""
    meta = getattr(model, "metadata", None) or {}
    ids = dict(bos_token=model.config.bos_token_id, eos_token=model.config.eos_token_id,
               unk_token=meta.get("unk_token_id"), pad_token=meta.get("pad_token_id"))
    out = {}
    for name, token_id in ids.items():
        text = token_text(model.tokenizer, token_id)
        if text is not None:
            out[name] = text
    return out


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' own: Jinja's built-in tojson escapes HTML characters, this one does not
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.now().strftime(format)


class _TemplateDict:
    """`dict(...)` in a template, without the class itself (transformers' TemplateDict)."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """Jinja's namespace refusing underscore names (transformers' TemplateNamespace)."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, "
                f"but got {name!r}.")


class _GenerationBlocks(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers' AssistantTracker tag, which marks
    the assistant's text for return_assistant_tokens_mask; rendered here as its body alone
    (what transformers renders), the marks unused."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


@lru_cache(maxsize=8)
def compile_template(template: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_GenerationBlocks, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env.from_string(template)


def render_chat(template: str, messages: list, add_generation_prompt: bool = True,
                **special) -> str:
    """The text the model reads for `messages` (dicts with "role" and "content")."""
    try:
        compiled = compile_template(template)      # a syntax error is a TemplateError too
        return compiled.render(messages=[dict(m) for m in messages], tools=None,
                               documents=None, add_generation_prompt=add_generation_prompt,
                               **special)
    except jinja2.exceptions.TemplateError as e:
        raise ChatTemplateError(str(e)) from None


def special_texts(tokenizer) -> dict:
    """Every special token's text -> its id (tiktoken's special tokens: matched whole)."""
    names = getattr(tokenizer, "special_tokens_set", None)
    if names is None:
        names = getattr(tokenizer, "special", {})
    out = {}
    for name in names:
        try:
            out[name] = tokenizer.encode_single_token(name)
        except (KeyError, ValueError):
            continue
    return out


def encode_chat(tokenizer, text: str) -> list:
    """The ids of a rendered chat: special tokens' texts matched whole, no BOS added."""
    return list(tokenizer.encode(text, allowed_special="all"))


def split_special(text: str, specials) -> list:
    """The text cut into (piece, is_special) in order, a special token's text one piece."""
    names = sorted(specials, key=len, reverse=True)
    pieces, start, i = [], 0, 0
    while i < len(text):
        hit = next((n for n in names if n and text.startswith(n, i)), None)
        if hit:
            if start < i:
                pieces.append((text[start:i], False))
            pieces.append((hit, True))
            i += len(hit)
            start = i
        else:
            i += 1
    if start < len(text):
        pieces.append((text[start:], False))
    return pieces


def specials_in(text: str, specials) -> list:
    """The special tokens' texts found in `text` (a message's), in the order they appear."""
    return [piece for piece, special in split_special(text, specials) if special]
