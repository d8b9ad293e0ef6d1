"""Every figure on the page, for every registered section: valid Plotly JSON written as plain
dicts, in the one style of web.figures.base_layout (readable ticks, axes sized to their labels,
titled axes, one diverging scale centred on 0 for signed values)."""
import ast
import glob
import html
import json
import os
import re

import numpy as np
import plotly.graph_objects as go
import pytest

from web.figures import DIVERGING, TICK_SIZE, base_layout, signed_colours
from web.figures.attention import MASKED
from web.figures.positions import TWILIGHT
from web.registry import SECTIONS
from web_support import HX, app, model, text_of  # noqa: F401
from test_web_embeddings import array

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION_IDS = [s.id for s in SECTIONS]
AXIS = re.compile(r"[xy]axis\d*$")


def figures_of(page: str) -> list:
    return [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)]


@pytest.fixture(scope="module")
def pages(app):  # noqa: F811
    c = app.test_client()
    return {s.id: text_of(c.get(f"/section/{s.id}", headers=HX)) for s in SECTIONS}


def test_no_figure_module_imports_graph_objects():
    """graph_objects validates every property (tens of ms a figure): the request path writes
    plotly.js JSON itself."""
    for path in glob.glob(os.path.join(ROOT, "web", "figures", "*.py")):
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [getattr(node, "module", None) or ""] + [a.name for a in node.names]
                assert not any("graph_objects" in n for n in names), path


@pytest.mark.parametrize("section", SECTION_IDS)
def test_every_figure_is_valid_plotly_in_the_page_style(pages, section):
    figures = figures_of(pages[section])
    for fig in figures:
        go.Figure(fig)                            # raises on a property plotly does not know
        layout = fig["layout"]
        assert "template" not in layout           # plain dicts: no graph_objects template
        axes = {k: v for k, v in layout.items() if AXIS.match(k)}
        assert {"xaxis", "yaxis"} <= set(axes)
        for name, axis in axes.items():
            where = f"{section}: {(layout.get('title') or {}).get('text')!r} {name}"
            assert axis["automargin"] is True, where
            assert axis["tickfont"]["size"] >= 14, where
            if axis.get("title", {}).get("text"):
                assert axis["title"]["font"]["size"] >= 14, where
            if axis.get("type") == "log":
                # ticks at powers of ten only (dtick n: every n-th decade), never minor labels
                dtick = axis.get("dtick")
                assert (isinstance(dtick, int) and dtick >= 1) or axis.get("tickmode") == "array", where


@pytest.mark.parametrize("section", SECTION_IDS)
def test_signed_heatmaps_use_the_one_diverging_scale_centred_on_zero(pages, section):
    for fig in figures_of(pages[section]):
        for trace in fig["data"]:
            if trace.get("type") != "heatmap" or "z" not in trace or "coloraxis" in trace:
                continue
            if trace.get("colorscale") in (TWILIGHT, [[0, MASKED], [1, MASKED]]):
                continue                # angles (cyclic: -180 meets 180); the mask's layer
            z = array(trace["z"]).astype(np.float64)
            if np.nanmin(z) < 0:
                assert trace["colorscale"] == DIVERGING, section
                assert trace["zmid"] == 0 and trace["zmin"] == -trace["zmax"], section
                assert np.nanmax(np.abs(z)) <= trace["zmax"] * (1 + 1e-6), section


def test_base_layout_styles_every_axis_it_is_given():
    layout = base_layout(xaxis=dict(title=dict(text="tokens"), type="log"),
                         yaxis3=dict(tickfont=dict(size=9), automargin=False),
                         legend=dict(orientation="h"))
    for name in ("xaxis", "yaxis", "yaxis3"):
        assert layout[name]["automargin"] is True
        assert layout[name]["tickfont"]["size"] == TICK_SIZE
    assert layout["xaxis"]["dtick"] == 1 and layout["xaxis"]["title"]["text"] == "tokens"
    assert layout["xaxis"]["title"]["font"]["size"] >= 14
    assert layout["legend"] == dict(orientation="h", font=dict(size=TICK_SIZE))


def test_signed_colours_are_symmetric_around_a_white_zero():
    c = signed_colours(2.5)
    assert (c["zmin"], c["zmid"], c["zmax"]) == (-2.5, 0, 2.5)
    assert [0.5, "#ffffff"] in DIVERGING
    stops = [p for p, _ in DIVERGING]
    assert stops == sorted(stops) and stops[0] == 0 and stops[-1] == 1
    assert signed_colours(0)["zmax"] == 1.0            # an all-zero tensor still has a scale
