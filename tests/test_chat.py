"""pipeline/chat.py against transformers' apply_chat_template on SmolLM2-135M-Instruct's GGUF file:
the template read from the file, the special-token variables, the rendered text and the ids of
several conversations (tests/fixtures/chat_reference.json, written once by
tests/fixtures/make_chat_fixtures.py with transformers; these tests need no torch)."""
import json
import os

import pytest

from pipeline.chat import (
    ChatTemplateError,
    chat_template_of,
    encode_chat,
    render_chat,
    special_texts,
    special_tokens,
    split_special,
)

REF = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures",
                                  "chat_reference.json"), encoding="utf-8"))
CASES = REF["cases"]


def test_the_file_carries_the_template_transformers_reads(smollm2):
    assert chat_template_of(smollm2) == REF["chat_template"]


def test_special_token_variables_are_transformers_special_tokens_map(smollm2):
    assert special_tokens(smollm2) == REF["special_tokens_map"]
    assert smollm2.config.eos_token_id == REF["eos_token_id"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['name']}-{c['add_generation_prompt']}")
def test_rendered_text_and_ids_equal_transformers(smollm2, case):
    text = render_chat(chat_template_of(smollm2), case["messages"],
                       add_generation_prompt=case["add_generation_prompt"],
                       **special_tokens(smollm2))
    assert text == case["text"]
    assert encode_chat(smollm2.tokenizer, text) == case["ids"]


def test_cases_cover_what_they_claim():
    names = {c["name"] for c in CASES}
    assert {"question", "with_system", "multi_turn", "unicode"} <= names
    # the template's default system message appears only when the chat has none of its own
    default = "You are a helpful AI assistant named SmolLM"
    for c in CASES:
        has_system = c["messages"][0]["role"] == "system"
        assert (default in c["text"]) != has_system


def test_split_special_marks_every_special_token_and_keeps_the_text(smollm2):
    specials = special_texts(smollm2.tokenizer)
    assert specials["<|im_start|>"] == 1 and specials["<|im_end|>"] == 2
    text = CASES[0]["text"]
    pieces = split_special(text, specials)
    assert "".join(p for p, _ in pieces) == text
    marked = [p for p, special in pieces if special]
    ids = CASES[0]["ids"]
    assert len(marked) == sum(1 for i in ids if i in (1, 2))     # one mark per special id
    assert all(p in specials for p in marked)


def test_raise_exception_and_sandbox_are_transformers(smollm2):
    with pytest.raises(ChatTemplateError, match="only user turns"):
        render_chat("{% if messages[0].role != 'user' %}{{ raise_exception('only user turns') }}"
                    "{% endif %}", [{"role": "system", "content": "x"}])
    # trim_blocks and lstrip_blocks: block tags take their newline and indentation with them
    assert render_chat("  {% for m in messages %}\n{{ m.content }}|\n  {% endfor %}\n",
                       [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]) \
        == "a|\nb|\n"
    # the sandbox refuses what a template from the Hub must not reach
    with pytest.raises(ChatTemplateError, match="'__class__' of 'list' object is unsafe"):
        render_chat("{{ messages.__class__.__mro__ }}", [])
    # immutable: a template cannot change the caller's messages
    messages = [{"role": "user", "content": "a"}]
    with pytest.raises(ChatTemplateError, match="'append' of 'list' object is unsafe"):
        render_chat("{{ messages.append(1) }}", messages)
    assert messages == [{"role": "user", "content": "a"}]
    # tojson does not escape HTML, as transformers' own filter
    assert render_chat("{{ messages[0] | tojson }}", [{"role": "user", "content": "<é>"}]) \
        == '{"role": "user", "content": "<é>"}'


def test_austen_has_no_chat_template(model):
    assert chat_template_of(model) is None


def test_generation_blocks_and_loop_controls_render_as_in_transformers():
    # {% generation %} (transformers' AssistantTracker tag) renders its body; break works
    template = ("{% for m in messages %}{% if m.role == 'stop' %}{% break %}{% endif %}"
                "{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}")
    assert render_chat(template, [{"role": "a", "content": "x"}, {"role": "b", "content": "y"},
                                  {"role": "stop", "content": "z"}]) == "[x][y]"
    with pytest.raises(ChatTemplateError):
        render_chat("{% for m in messages %}", [])            # a syntax error: refused, said
