"""The roofline section shows pipeline/roofline.py's numbers for the chosen configuration."""
import html
import re

import numpy as np
import pytest

from pipeline.published import published
from pipeline.roofline import (
    decode_work,
    hardware,
    model_costs,
    prefill_work,
    roofline,
    weight_scheme,
)
from web.model_state.measured import cost_table, stamp
from web_support import HX, error_message, text_of, url, without_definitions


def plain_text(page):
    """The text as it reads: no markup, no glossary definitions."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", without_definitions(page))))



def test_estimates_on_the_page_are_the_formulas(client):
    page = text_of(client.get(url("/section/roofline", rf_model="Llama 3.1 70B", rf_bits=8,
                                  rf_len=2048, rf_batch=32), headers=HX))
    text = plain_text(page)
    p = published("Llama 3.1 70B")
    c = model_costs(p.config, p.reported_params, 2, 2, weight_scheme(8))   # int8, as quantized
    assert f"{p.reported_params:,} parameters" in text
    assert f"prefill of 2,048 tokens {prefill_work(c, 2048).intensity:.1f} FLOP/byte" in text
    h = hardware("NVIDIA H100 SXM")
    row = re.search(r"NVIDIA H100 SXM (.*?) AMD", text).group(1)
    for work in (prefill_work(c, 2048), decode_work(c, 2048, 1), decode_work(c, 2048, 32)):
        est = roofline(work, h.peak_flops, h.bandwidth)
        tps = est.tokens_per_second
        shown = f"{tps:,.0f}" if tps >= 10 else f"{tps:.2g}"
        assert f"{shown} ({est.bound})" in row
    assert "exceed its 80 GiB" in row           # 73 GB of int8 weights + 32 x 2049 tokens of KV


def test_live_point_is_the_cost_table_at_the_prompts_length(client, model):
    text = plain_text(text_of(client.get(url("/section/roofline", prompt="Emma Woodhouse"),
                                         headers=HX)))
    n = len(model.tokenizer.encode("Emma Woodhouse"))
    lm = client.application.extensions["explainer"].default_model
    table = cost_table(lm)
    assert n < min(table.prefill)                # shorter than every length timed
    prefill, decode = table.prefill_at(n), table.decode_at(n)
    assert f"on your prompt of {n} tokens, read from its cost table" in text
    assert f"(measured at {stamp(table.measured_at)};" in text
    assert (f"a prefill at {n} tokens, from the cost table: {prefill.shown} ms "
            f"({prefill.how()})") in text
    assert (f"one decode step at {n} tokens, from the cost table: {decode.shown} ms "
            f"({decode.how()})") in text
    assert f"measured at {min(table.prefill)} tokens, the shortest length timed" in prefill.how()
    # the speeds are those times' own
    assert f"that is {1 / decode.seconds:,.0f} tokens/s" in text


@pytest.mark.parametrize("query,name,message", [
    (dict(rf_bits=5), "rf_bits", "must be one of 16, 8, 4"),
    (dict(rf_model="GPT-5"), "rf_model", "Model must be one of GPT-2 small, GPT-2 medium,"),
    (dict(rf_model="GPT-5"), "rf_model", "Llama 3.1 405B; got 'GPT-5'."),
    (dict(rf_model="GPT-2 small", rf_len=4096), "rf_len", "reads at most 1,024 tokens"),
    (dict(rf_batch=0), "rf_batch", "between 1 and 1024"),
    (dict(rf_len="lots"), "rf_len", "must be a whole number"),
])
def test_bad_values_get_a_message_and_a_4xx(client, query, name, message):
    response = client.get(url("/section/roofline", **query), headers=HX)
    assert 400 <= response.status_code < 500
    assert message in error_message(text_of(response), name)


def test_y_axis_labels_every_power_of_ten_with_its_si_prefix(client):
    """One label per power of ten from below the lowest point to above the highest, written
    with SI prefixes (plotly's own labels switch to 10^15 past T)."""
    import json
    page = text_of(client.get(url("/section/roofline"), headers=HX))
    fig = json.loads(html.unescape(re.search(r'data-figure="([^"]*)"', page).group(1)))
    axis = fig["layout"]["yaxis"]
    ys = [y for trace in fig["data"] for y in trace["y"]]
    assert axis["tickvals"][0] <= min(ys) and axis["tickvals"][-1] >= max(ys)
    prefix = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P"}
    for value, text in zip(axis["tickvals"], axis["ticktext"], strict=True):
        e = round(np.log10(value))
        assert value == 10.0 ** e and text == f"{10 ** (e % 3)}{prefix[e - e % 3]}"
    assert "1P" in axis["ticktext"]                         # the MI300X's roof is above 1 PFLOP/s


def test_disclosure_open_from_the_url(client):
    closed = r'<details class="deeper" id="deeper-rf-chips"[^>]*\bopen\b'
    assert not re.search(closed, text_of(client.get(url("/section/roofline"), headers=HX)))
    page = text_of(client.get(url("/section/roofline", open="rf-chips"), headers=HX))
    assert re.search(closed, page)


def test_this_servers_roof_is_measured_once_in_web_measured(client):
    """web.model_state.measured.machine: the roof the roofline and generation sections cite,
    measured once
    (a second call returns the same measurement and measures nothing)."""
    from web.model_state import measured
    first = measured.machine_measurement()
    count = measured.measurements()
    assert measured.machine_measurement() is first and measured.machine() is first[0]
    assert measured.measurements() == count
    assert first[0].peak_flops > 0 and first[0].bandwidth > 0
    page = plain_text(text_of(client.get(url("/section/roofline"), headers=HX)))
    assert f"measured at {measured.stamp(first[1])}" in page
