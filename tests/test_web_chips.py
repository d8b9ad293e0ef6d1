"""Token chips are coloured by token id, not by position (web.presentation.tokens.chip_colour and
templates/macros.html's chip_colour, the same formula): the same token has the same colour in
every list of chips on the page, so a repeated token is seen to repeat."""
import re
from collections import defaultdict

import pytest

from web.core.params import PROMPT
from web.presentation.tokens import CHIP_COLOURS, chip_colour
from web_support import ordered_list, text_of, url

LIVE = {"HX-Request": "true", "HX-Target": "overview-live", "HX-Trigger": "ov-next"}
# " a" four times, " the" and "," twice: repetition the chips must show
REPEATS = "the cat and the dog, a hat, a mat and a bat"


def chips(page: str, label: str) -> list:
    """[(token id, colour class)] of the chips of the list labelled `label`."""
    return [(int(i), c) for c, i in re.findall(
        r'<li class="chip (c\d)\b[^"]*"[^>]*>.*?<span class="tid">(\d+)</span>',
        ordered_list(page, label), re.S)]


def check(pairs: list):
    """Every chip's colour is its id's; one id, one colour; and most neighbours with different
    ids differ (6 colours: about 1 pair in 6 shares one by chance)."""
    assert pairs
    colours = defaultdict(set)
    for i, c in pairs:
        assert c == f"c{chip_colour(i)}", (i, c)
        colours[i].add(c)
    assert all(len(c) == 1 for c in colours.values())
    neighbours = [(a, b) for a, b in zip(pairs, pairs[1:], strict=False) if a[0] != b[0]]
    if len(neighbours) >= 6:
        assert sum(a[1] != b[1] for a, b in neighbours) >= 0.6 * len(neighbours)


def test_the_formula_of_the_template_is_the_pythons(app):
    macros = app.jinja_env.get_template("macros.html").module
    for i in list(range(600)) + [4095, 49151, 100_255]:
        assert str(macros.chip_colour(i)).strip() == f"c{chip_colour(i)}"
    # spread over the six colours, and neighbouring ids mostly differ
    counts = [sum(chip_colour(i) == c for i in range(4096)) for c in range(CHIP_COLOURS)]
    assert min(counts) > 0.8 * 4096 / CHIP_COLOURS
    assert sum(chip_colour(i) != chip_colour(i + 1) for i in range(4095)) > 0.75 * 4095


@pytest.mark.parametrize("prompt", [PROMPT.default, REPEATS])
def test_tokenization_chips_by_id(client, model, prompt):
    page = text_of(client.get(url("/section/tokenization", prompt=prompt)))
    pairs = chips(page, "Tokens of the prompt")
    ids = list(model.tokenizer.encode_ordinary(prompt))
    assert [i for i, _ in pairs] == ids
    assert len(set(ids)) < len(ids)                       # the prompt repeats a token
    check(pairs)
    # a repeated token at two positions that position-based colours (index % 6) would split
    first, split = {}, []
    for n, t in enumerate(ids):
        if t in first:
            split.append((first[t], n))
        first.setdefault(t, n)
    assert any((a - b) % 6 for a, b in split)


def test_overview_chips_by_id_and_the_chosen_token_too(client, model):
    page = text_of(client.get(url("/overview", prompt=REPEATS, ov_steps=3), headers=LIVE))
    pairs = chips(page, "Tokens of the pass")
    check(pairs)
    assert [i for i, _ in pairs][:4] == list(model.tokenizer.encode_ordinary(REPEATS))[:4]
    (chosen,) = chips(page, "Chosen next token")
    check([chosen])


def test_generation_chips_by_id(client):
    page = text_of(client.get(url("/section/generation", prompt=REPEATS, gen_step=12)))
    generated = [p for p in chips(page, "Sequence at this step")]
    check(generated)


def test_learned_tokens_one_colour_per_token(client):
    """The learn-BPE demo's tokens have no id: one colour per distinct token, in order of first
    appearance (so the same learned token has one colour)."""
    text = "low lower lowest low low newer newest new"
    page = text_of(client.get(url("/section/tokenization", bpe_text=text, merges=8)))
    inner = ordered_list(page, "The text in learned tokens")
    shown = re.findall(r'<li class="chip (c\d)"><span class="tok">(.*?)</span></li>', inner,
                       re.S)
    assert len(shown) > 8
    colour = {}
    for c, tok in shown:
        assert colour.setdefault(tok, c) == c, tok
    order = list(dict.fromkeys(tok for _, tok in shown))
    assert [colour[t] for t in order] == [f"c{n % 6}" for n in range(len(order))]
