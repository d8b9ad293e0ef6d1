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

from test_web_embeddings import array
from web.core.registry import SECTIONS
from web.figures import DIVERGING, TICK_SIZE, TITLE_SIZE, base_layout, signed_colours
from web.figures.attention import MASKED
from web.figures.positions import TWILIGHT
from web_support import HX, text_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION_IDS = [s.id for s in SECTIONS]
AXIS = re.compile(r"[xy]axis\d*$")


def figures_of(page: str) -> list:
    return [json.loads(html.unescape(f)) for f in re.findall(r'data-figure="([^"]*)"', page)]


@pytest.fixture(scope="module")
def pages(app):
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
            # sized to its labels, so none is hidden past the edge: plotly.js then does not
            # measure every label again as each is placed (n squared layouts per redraw)
            assert axis["ticklabeloverflow"] == "allow", where
            assert axis["tickfont"]["size"] >= 14, where
            if axis.get("title", {}).get("text"):
                assert axis["title"]["font"]["size"] >= 14, where
            if axis.get("type") == "log":
                # ticks at powers of ten only (dtick n: every n-th decade), never minor labels
                dtick = axis.get("dtick")
                assert (isinstance(dtick,
                                   int) and dtick >= 1) or axis.get("tickmode") == "array", where
        for trace in fig["data"]:
            # every colour bar, a heatmap's own (shown unless showscale is false) or a marker's
            bars = [trace.get("colorbar")] if trace["type"] == "heatmap" or "colorbar" in trace \
                else []
            if "colorbar" in trace.get("marker", {}) or trace.get("marker", {}).get("showscale"):
                bars.append(trace["marker"].get("colorbar"))
            for bar in bars:
                assert bar["ticklabeloverflow"] == "allow", (section, trace.get("name"))


@pytest.mark.parametrize("section", SECTION_IDS)
def test_signed_heatmaps_use_the_one_diverging_scale_centred_on_zero(pages, section):
    for fig in figures_of(pages[section]):
        for trace in fig["data"]:
            if trace.get("type") != "heatmap" or "z" not in trace or "coloraxis" in trace:
                continue
            if trace.get("colorscale") in (TWILIGHT, [[0, MASKED], [1, MASKED]]):
                continue                # angles (cyclic: -180 meets 180); the mask's layer
            if (trace.get("meta") or {}).get("scale") == "log10":
                continue                # log10 of a positive quantity (a norm), not signed
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


def test_base_layout_gives_every_title_one_size_and_one_alignment():
    """Titles were 13 px from the left edge in some figures, Plotly's 21 px centred in others:
    base_layout sets one size and one alignment over whatever the figure asked, and keeps the
    figure's text and its vertical place."""
    for title in ("Plain", dict(text="Small, left", font=dict(size=13), x=0, xanchor="left"),
                  dict(text="Big, centred", font=dict(size=22, color="red"), x=0.5,
                       xanchor="center", xref="paper", yref="container", y=1, yanchor="top",
                       pad=dict(t=8))):
        got = base_layout(title=title)["title"]
        want = title if isinstance(title, dict) else dict(text=title)
        assert got["text"] == want["text"]
        assert got["font"]["size"] == TITLE_SIZE
        assert (got["x"], got["xanchor"], got["xref"],
                got["pad"]["l"]) == (0, "left", "container", 10)
        for key in ("y", "yref", "yanchor"):
            assert got.get(key) == want.get(key)
        assert got["pad"].get("t") == want.get("pad", {}).get("t")
    assert base_layout(title=dict(text="x", font=dict(size=22, color="red")))["title"]["font"] == \
        dict(size=TITLE_SIZE, color="red")
    assert "title" not in base_layout(height=300)


@pytest.mark.parametrize("section", SECTION_IDS)
def test_every_figure_title_has_the_one_size_and_alignment(pages, section):
    titled = [f for f in figures_of(pages[section]) if (f["layout"].get("title") or {}).get("text")]
    for fig in titled:
        title = fig["layout"]["title"]
        where = f"{section}: {title['text']!r}"
        assert title["font"]["size"] == TITLE_SIZE, where
        assert (title["x"], title["xanchor"], title["xref"]) == (0, "left", "container"), where


def test_every_figure_builder_lays_its_figure_out_with_base_layout():
    """The one place of the page's style: a function of web/figures that writes a figure
    (figure_json) builds its layout with base_layout, or returns a layout built by one."""
    for path in glob.glob(os.path.join(ROOT, "web", "figures", "*.py")):
        tree = ast.parse(open(path, encoding="utf-8").read())
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            calls = {c.func.id for c in ast.walk(fn)
                     if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
            if "figure_json" in calls:
                assert "base_layout" in calls, f"{os.path.basename(path)}: {fn.name}"


def test_signed_colours_are_symmetric_around_a_white_zero():
    c = signed_colours(2.5)
    assert (c["zmin"], c["zmid"], c["zmax"]) == (-2.5, 0, 2.5)
    assert [0.5, "#ffffff"] in DIVERGING
    stops = [p for p, _ in DIVERGING]
    assert stops == sorted(stops) and stops[0] == 0 and stops[-1] == 1
    assert signed_colours(0)["zmax"] == 1.0            # an all-zero tensor still has a scale


# --- Labels that stood clear on the small model and collided on SmolLM2 (30 blocks, a GGUF
# file's long name): each figure's layout leaves its labels the room they need.

def _layout(fig_json: str) -> dict:
    return json.loads(fig_json)["layout"]


def _plot_px(layout: dict) -> float:
    """The most the plot can be tall: the figure less its top and bottom margins."""
    return layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]


@pytest.mark.parametrize("n_tokens", [5, 22, 61, 200])
def test_residual_norm_rows_are_labelled_at_most_one_per_line(n_tokens):
    from web.figures import LINE_PX, text_px
    from web.figures.block import norms_heatmap, norms_layout_px
    from web.sections.block import stage_labels
    stages = stage_labels(30)                                   # SmolLM2's 61 stages
    tokens = [f"tok{i}" for i in range(n_tokens)]
    fig = json.loads(norms_heatmap(np.ones((n_tokens, len(stages))), tokens, stages))
    layout = fig["layout"]
    _, plot_px = norms_layout_px(n_tokens, stages)
    shown = layout["yaxis"]["tickvals"]
    assert len(shown) * LINE_PX <= plot_px                      # labels never collide
    # the plot keeps that height once the vertical stage labels and the x title are below it
    assert _plot_px(layout) - text_px(stages) - 32 >= plot_px
    # hover still names every row's token
    assert [row[0][0] for row in fig["data"][0]["customdata"]] == \
        [f"{i}: tok{i}" for i in range(n_tokens)]


@pytest.mark.parametrize("n_tokens", [2, 5, 30, 120])
def test_attention_matrix_is_taller_than_its_query_title(n_tokens):
    from web.figures import FONT, LINE_PX, text_px
    from web.figures.attention import QUERY_TITLE, token_matrix_figure, token_matrix_height
    tokens = [" France"] * n_tokens
    layout = _layout(token_matrix_figure(np.eye(n_tokens), tokens, "Layer 29, head 0", 0,
                                         kind="pattern"))
    keys = [f"{t} ·{i}" for i, t in enumerate(tokens)]
    height, plot_px = token_matrix_height(n_tokens, keys)
    assert layout["height"] == height
    # the vertical y title fits beside the plot, so it cannot reach the figure's title
    assert plot_px >= text_px([QUERY_TITLE]) * FONT["size"] / 14
    assert _plot_px(layout) - text_px(keys) - 32 >= plot_px
    assert len(layout["yaxis"]["tickvals"]) * LINE_PX <= plot_px


def test_tile_grid_is_taller_than_its_query_title():
    from web.figures import FONT, text_px
    from web.figures.tiling import QUERY_TITLE, tiles_figure
    for T in (3, 5, 40):
        layout = _layout(tiles_figure(np.ones((T, T)) / T, ["a"] * T, 8, 8, T - 1, 1, 1))
        # the square plot: the height less the title above, the ticks and x title below
        assert _plot_px(layout) - 24 - 28 >= text_px([QUERY_TITLE]) * FONT["size"] / 14


def test_long_model_names_are_wrapped_on_the_bar_charts():
    from web.figures import NAME_LINE_CHARS, wrap_name
    from web.figures.block import shares_figure
    from web.figures.tokenization import encodings_figure
    long = "SmolLM2-135M-Instruct.Q4_1.gguf (running here)"
    assert wrap_name(long) == ["SmolLM2-135M-", "Instruct.Q4_1.gguf", "(running here)"]
    assert wrap_name("GPT-2 small") == ["GPT-2 small"]
    row = dict(name=long, total=100, embedding=10, attention=30, ffn=55, norms=5)
    for fig in (json.loads(shares_figure([row, dict(row, name="GPT-2 small")])),
                json.loads(encodings_figure([(long, 7), ("cl100k_base", 6)]))):
        names = fig["data"][0]["y"]
        assert all(len(line) <= NAME_LINE_CHARS for n in names for line in n.split("<br>"))
        assert long in json.dumps(fig["data"][0]["customdata"])      # hover names it whole


def test_long_axis_titles_are_two_short_lines():
    """Axis titles that ran past a phone's plot (about 300 px: 35 characters) are two lines."""
    from web.figures.attention import head_measures_figure
    from web.figures.batching import memory_figure
    deep = {k: np.zeros((30, 9)) for k in ("previous", "first", "same")}
    for layout in (_layout(head_measures_figure(deep)),
                   _layout(memory_figure([dict(step=0, contiguous=1, paged=1, used=1)], 16))):
        titles = [a["title"]["text"] for k, a in layout.items()
                  if AXIS.match(k) and a.get("title", {}).get("text")]
        assert titles and all(len(line) <= 36 for t in titles for line in t.split("<br>"))


# --- Colour roles: one colour, one meaning, in neighbouring sections

def test_greedy_and_accepted_and_the_highlight_are_distinct_roles(pages):
    from web.figures import ACCEPTED, CHOICE, HIGHLIGHT, ROLE_NAMES, ROLES, decoding, speculative
    assert len({ACCEPTED, CHOICE, HIGHLIGHT}) == 3
    assert decoding.GREEDY == CHOICE != ACCEPTED and decoding.BEST == HIGHLIGHT
    parts = {key: ROLES[role] for key, _, role in speculative.PARTS}
    assert parts["target"] == speculative.TARGET not in (HIGHLIGHT, ACCEPTED, CHOICE)
    # the target alone decodes token by token: its own colour, not the verifying passes'
    assert speculative.ALONE == ROLES["DECODE"] != speculative.TARGET
    # the drawn tree uses them
    tree = [f for f in figures_of(pages["decoding"])
            if any(t.get("name") == "greedy path" for t in f["data"])]
    assert tree
    for fig in tree:
        colours = {t["name"]: t["line"]["color"] for t in fig["data"]
                   if t.get("name") in ("greedy path", "best beam")}
        assert colours == {"greedy path": CHOICE, "best beam": HIGHLIGHT}
    # the text names the colours the tree draws
    template = open(os.path.join(ROOT, "templates", "sections", "decoding.html"),
                    encoding="utf-8").read()
    assert f"{ROLE_NAMES[CHOICE]}: greedy" in template
    assert f"{ROLE_NAMES[HIGHLIGHT]}: the best" in template
    # an accepted chip is outlined in the figures' "accepted" green
    css = open(os.path.join(ROOT, "static", "style.css"), encoding="utf-8").read()
    assert re.search(r"\.sp\.acc \{ outline: 2px solid " + ACCEPTED, css)
