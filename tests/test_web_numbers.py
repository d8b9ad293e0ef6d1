"""How the page writes numbers and counts (web/presentation/numbers.py): no negative zero, nouns and
verbs
that agree with their number."""
import re

import pytest

from pipeline.sampling import entropy_bits
from web.presentation.numbers import agree, count, fixed


@pytest.mark.parametrize("value, places, text", [
    (-0.0, 2, "0.00"), (-0.004, 2, "0.00"), (-1e-12, 3, "0.000"), (-0.005001, 2, "-0.01"),
    (0.004, 2, "0.00"), (1.2345, 2, "1.23"), (-2.527, 3, "-2.527"), (0, 0, "0")])
def test_fixed_never_writes_a_negative_zero(value, places, text):
    assert fixed(value, places) == text


@pytest.mark.parametrize("n, text", [(0, "0 tokens"), (1, "1 token"), (2, "2 tokens"),
                                     (49152, "49,152 tokens")])
def test_count_agrees_with_its_number(n, text):
    assert count(n, "token") == text


def test_a_verb_agrees_with_its_number():
    assert [agree(n, "holds", "hold") for n in (1, 2, 0)] == ["holds", "hold", "hold"]
    assert count(1, "child", "children") == "1 child" and count(3, "child", "children") == \
        "3 children"


def test_entropy_is_never_negative():
    """A one-hot distribution's -sum p log p is -0.0 in floating point; float32 probabilities
    summing to a hair over 1 give a tiny negative: both are 0 bits."""
    import numpy as np
    assert str(entropy_bits(np.array([1.0, 0.0]))) == "0.0"
    assert entropy_bits(np.array([1.0000001], dtype=np.float32)) == 0.0
    assert entropy_bits(np.array([0.5, 0.5])) == pytest.approx(1.0)


@pytest.mark.parametrize("n, text", [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"),
                                     (12, "12th"), (13, "13th"), (21, "21st"), (22, "22nd"),
                                     (30, "30th"), (101, "101st"), (111, "111th")])
def test_ordinal(n, text):
    from web.presentation.numbers import ordinal
    assert ordinal(n) == text


def test_a_block_numbered_from_0_is_counted_for_people(client, model):
    """The block diagram names block 3 of the 4-block model by its index and as the 4th."""
    from web_support import HX, text_of, url
    page = text_of(client.get(url("/section/block", blk_layer=3), headers=HX))
    said = " ".join(re.sub(r"<[^>]+>", "", page).split())
    assert (f"Block 3 (numbered from 0 as in the code, blocks.3: the 4th of "
            f"{model.config.n_layers}; all have these shapes)") in said
