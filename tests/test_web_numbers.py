"""How the page writes numbers and counts (web/presentation/numbers.py): no negative zero, nouns and
verbs
that agree with their number."""
import os
import re

import numpy as np
import pytest

from pipeline.sampling import entropy_bits
from web.presentation.numbers import (
    agree,
    count,
    fixed,
    grouped,
    ms,
    percent,
    probability,
    sci,
    shape,
    sig,
    signed,
    size,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


@pytest.mark.parametrize("value, fmt, filtered", [
    (2.5, "%+.1f", lambda v: signed(v, 1)), (-0.3149, "%+.2f", lambda v: signed(v, 2)),
    (123456.0, "%g", sig), (0.000123456, "%.3g", lambda v: sig(v, 3)),
    (1234567.0, "%.2g", lambda v: sig(v, 2)), (1.25e-5, "%.1e", lambda v: sci(v, 1)),
    (np.float32(0.1), "%.6g", lambda v: sig(v, 6)), (np.int64(49152), "{:,}", grouped),
    (1023.6, "{:,.0f}", lambda v: grouped(v, 0)), (1234.5, "{:,}", grouped)])
def test_each_filter_writes_what_its_format_wrote(value, fmt, filtered):
    """The filters replaced the templates' inline formats: the same text, digit for digit."""
    expected = fmt.format(value) if fmt.startswith("{") else fmt % value
    assert filtered(value) == expected


def test_signs_and_zeros():
    assert [signed(v, 1) for v in (0.04, -0.04, -0.06, 0.0)] == ["+0.0", "+0.0", "-0.1", "+0.0"]
    assert sig(-0.0) == "0" and sig(-1e-7) == "-1e-07"
    assert grouped(-0.4, 0) == "0" and grouped(-1234.6, 0) == "-1,235"


def test_percentages_milliseconds_sizes_and_shapes():
    assert percent(0.125) == "12.5%" and percent(0.00004, 2) == "0.00%"
    assert [percent(p, 2, 0.0001) for p in (0, 0.00004, 0.0001, 0.5)] == [
        "0%", "<0.01%", "0.01%", "50.00%"]
    assert [probability(p) for p in (0, 0.5, 0.000123, 1e-9)] == [
        "0%", "50.0%", "0.012%", "<0.000001%"]
    assert ms(0.0031416, 2) == "3.14 ms" and ms(2.5) == "2500.0 ms"
    assert size(12_345_678) == "12.3 MB" and size(2.5e9, "GB", 2) == "2.50 GB"
    assert shape([21, np.int64(576)]) == "[21, 576]" and shape([7]) == "[7]"


def test_the_templates_format_numbers_with_the_filters_only():
    """No inline "%.2f"|format(x) or "{:,}".format(x) is left in a template: one way to write
    a number, which never prints a negative zero."""
    inline = re.compile(r"""["'][^"'{}]*(%[-+ #0]*[\d.]*[dfgeEs]|\{:[^}]*\})[^"']*["']"""
                        r"""\s*(\|\s*format\s*\(|\.format\s*\()""")
    found = []
    for folder, _, names in os.walk(os.path.join(ROOT, "templates")):
        for name in names:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                found += [(name, m.group(0)) for m in inline.finditer(f.read())]
    assert found == []
