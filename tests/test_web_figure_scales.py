"""Figures that compare share a scale a reader can compare on, and each legend entry has a
swatch of its own."""
import json

from web.figures import generation, speculative


def test_prefill_and_per_token_costs_are_on_a_log_axis():
    """A whole prefill (80 ms) and a token's cost (0-3 ms) on one linear axis left the
    per-token lines flat at 0."""
    sweep = [dict(n=n, prefill_s=0.002 * n, decode_s=0.001 + 0.00001 * n) for n in (8, 64, 256)]
    fig = json.loads(generation.prefill_decode_figure(sweep, 26, 0.05, 0.0012))
    assert fig["layout"]["yaxis"]["type"] == "log"
    assert "log" in fig["layout"]["yaxis"]["title"]["text"]


def test_target_alone_and_target_verifies_have_different_swatches():
    fig = json.loads(speculative.time_figure(1.0, 24, dict(prefill=0.1, draft=0.05,
                                                           target=0.6, other=0.01), 24))
    swatch = {t["name"]: (t["marker"]["color"], json.dumps(t["marker"].get("pattern"),
                                                          sort_keys=True))
              for t in fig["data"]}
    assert len(set(swatch.values())) == len(swatch), swatch
