// How a figure is drawn on this page, as layouts for Plotly: the dark theme's colours, a long
// title or x-axis title wrapped on a narrow screen, the projector's larger fonts in presentation
// mode (and in the teacher's reveal, static/classroom.js), a phone's 14 px floor, and a
// tick-by-tick axis thinned at those sizes. Functions of the server's figure JSON and of the page (its CSS colours, its
// mode); figures.js draws with them (window.Explainer.figureStyle). Nothing here listens to
// events.
(function () {
  "use strict";
  function dark() {
    var theme = document.documentElement.getAttribute("data-theme");
    return theme === "dark" || (theme !== "light" && window.matchMedia &&
                                window.matchMedia("(prefers-color-scheme: dark)").matches);
  }

  // The server builds figures for a white page; the dark theme recolours the frame in the
  // page's own dark colours (CSS --paper, --ink, --line), the server's dark inks (the page names
  // them: data-dark-inks, from web/figures DARK_INKS; they would vanish on the dark paper: lines,
  // bars, the beam tree's edges) in the page's ink, and white label boxes. Colour scales are kept.
  function colours() {
    var css = getComputedStyle(document.documentElement);
    var get = function (name) { return css.getPropertyValue(name).trim(); };
    return { ink: get("--ink"), paper: get("--paper"), grid: get("--line") };
  }
  var darkInks = (document.documentElement.getAttribute("data-dark-inks") || "")
      .split(" ").filter(function (c) { return /^#[0-9a-f]{6}$/i.test(c); });
  var DARK_INKS = darkInks.length ? new RegExp('"(' + darkInks.join("|") + ')"', "gi") : null;
  function themedJSON(json) {
    return dark() && DARK_INKS ? json.replace(DARK_INKS, '"' + colours().ink + '"') : json;
  }
  function translucent(hex, alpha) {            // "#161b26" -> "rgba(22, 27, 38, alpha)"
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + ", " + ((n >> 8) & 255) + ", " + (n & 255) + ", " + alpha + ")";
  }
  function themed(layout) {
    if (!dark()) return layout;
    var c = colours(), ink = c.ink, paper = c.paper, grid = c.grid;
    var out = Object.assign({}, layout, { paper_bgcolor: paper, plot_bgcolor: paper,
      font: Object.assign({}, layout.font || {}, { color: ink }) });
    ["xaxis", "yaxis"].concat(Object.keys(layout)).forEach(function (k) {
      if (/^[xy]axis\d*$/.test(k)) out[k] = Object.assign({}, layout[k] || {}, { gridcolor: grid, zerolinecolor: grid });
    });
    // a label or legend boxed in white (the beam tree's nodes, the roofline's phases, legends
    // inside a plot) is boxed in the dark paper, in light ink
    var white = /^(white|#fff(fff)?|rgba\(255, ?255, ?255)/i, box = translucent(paper, 0.85);
    if (layout.annotations) out.annotations = layout.annotations.map(function (a) {
      return !white.test(a.bgcolor || "") ? a : Object.assign({}, a, {
        bgcolor: box, font: Object.assign({}, a.font || {}, { color: ink }) });
    });
    if (layout.legend && white.test(layout.legend.bgcolor || ""))
      out.legend = Object.assign({}, layout.legend, { bgcolor: box });
    return out;
  }

  // Plotly writes a figure's title on one line and cuts what does not fit the width (a phone):
  // a title longer than about a line of the figure's width is broken between words, set at the
  // top, and the top margin grows by its extra lines.
  var measure = document.createElement("canvas").getContext("2d");
  function wrapTitle(layout, width) {
    var t = layout.title;
    if (!t || !t.text || !width || t.text.indexOf("<br>") >= 0) return layout;
    var font = Object.assign({}, layout.font || {}, t.font || {});
    // Plotly's title is 1.4 times the page's font unless the figure sets its own size
    var size = (t.font && t.font.size) || 1.4 * ((layout.font && layout.font.size) || 12);
    measure.font = size + "px " + (font.family || "sans-serif");
    var room = width - 32;
    if (measure.measureText(t.text).width <= room) return layout;
    var lines = [""];
    t.text.split(" ").forEach(function (word) {
      var last = lines[lines.length - 1];
      if (last && measure.measureText(last + " " + word).width > room) lines.push(word);
      else lines[lines.length - 1] = last ? last + " " + word : word;
    });
    var margin = Object.assign({ t: 48 }, layout.margin || {});
    var extra = Math.ceil((lines.length - 1) * 1.3 * size);
    margin.t += extra;
    var height = (layout.height || 340) + extra;
    // the block's middle placed in pixels from the top (Plotly's "top" anchor sets the first
    // line's baseline there, which cut it off)
    var middle = 6 + lines.length * 1.3 * size / 2;
    return Object.assign({}, layout, { margin: margin, height: height, title: Object.assign({}, t, {
      text: lines.join("<br>"), yref: "container", y: 1 - middle / height, yanchor: "middle" }) });
  }

  // An x axis's title wider than a narrow figure leaves it (a phone: "tokens (prompt, or cache
  // for decode)") ran to the figure's right edge: it is written on two lines, broken at the
  // space nearest its middle; the axis's automargin makes room for the second line. `room`:
  // the figure's width less the y axis's labels and title (about 110 px) and an edge.
  function wrapAxisTitles(layout, width) {
    if (!width) return layout;
    var out = layout;
    Object.keys(layout).forEach(function (k) {
      var ax = layout[k], t = /^xaxis\d*$/.test(k) && ax && ax.title;
      var text = t && (typeof t === "string" ? t : t.text);
      if (!text || text.indexOf("<br>") >= 0) return;
      var size = (t.font && t.font.size) || (layout.font && layout.font.size) || 12;
      measure.font = size + "px " + ((layout.font && layout.font.family) || "sans-serif");
      if (measure.measureText(text).width <= width - 110) return;
      var at = -1, mid = text.length / 2;
      for (var i = 0; i < text.length; i++) {
        if (text[i] === " " && (at < 0 || Math.abs(i - mid) < Math.abs(at - mid))) at = i;
      }
      if (at < 0) return;
      if (out === layout) out = Object.assign({}, layout);
      out[k] = Object.assign({}, ax, { title: Object.assign({}, typeof t === "string" ? {} : t,
        { text: text.slice(0, at) + "<br>" + text.slice(at + 1) }) });
      // a legend placed under the plot (paper y < 0) moves down by the second line, the plot
      // taken as 40% of the figure's height at least (it met the title's second line)
      var lg = out.legend;
      if (lg && typeof lg.y === "number" && lg.y < 0 && (lg.yref || "paper") === "paper") {
        out.legend = Object.assign({}, lg, { y: lg.y - 1.3 * size / (0.4 * (out.height || 340)) });
      }
    });
    return out;
  }

  // Presentation mode (static/present.js) draws the figures for a projector: every font of the
  // figure's layout and traces 1.3 times the page's, none under 18 px (its ticks, legend,
  // labels and titles), and the slide's figure at the height present.js left it
  // (el._slideHeight). The server's figure is the same; only its drawing differs.
  var PRESENT_SCALE = 1.3, PRESENT_MIN_PX = 18;
  // The teacher's reveal (static/classroom.js drawReveal) is a layer over the slide for the
  // projector, in presentation mode or not: its chart is drawn at these sizes too (not on a
  // phone's width).
  function presenting(el) {
    return document.body.classList.contains("present") ||
      !!(el && el.closest(".class-panel.teacher .class-reveal") &&
         !(window.matchMedia && window.matchMedia("(max-width: 700px)").matches));
  }
  // every font of a figure's layout or traces `scale` times its size, none under `min` px
  function scaledFonts(v, key, scale, min) {
    if (Array.isArray(v)) return v.map(function (x) { return scaledFonts(x, key, scale, min); });
    if (typeof v === "string") {   // a label's own smaller size (<span style="font-size:11px">, <sup>)
      if (v.indexOf("<sup>") >= 0) {
        v = v.replace(/<sup>/g, '<span style="font-size:' + min + 'px">').replace(/<\/sup>/g, "</span>");
      }
      return v.indexOf("font-size") < 0 ? v : v.replace(/font-size:\s*([\d.]+)px/g, function (m, n) {
        return "font-size:" + Math.max(min, Math.round(n * scale)) + "px";
      });
    }
    if (!v || typeof v !== "object" || v.bdata) return v;
    var out = {};
    Object.keys(v).forEach(function (k) { out[k] = scaledFonts(v[k], k, scale, min); });
    if (/font$/i.test(key || "") && v.size !== undefined) {
      var big = function (n) { return Math.max(min, Math.round(n * scale)); };
      out.size = Array.isArray(v.size) ? v.size.map(big) : big(v.size);
    }
    return out;
  }
  function bigFonts(v, key) { return scaledFonts(v, key, PRESENT_SCALE, PRESENT_MIN_PX); }

  // A phone (the page's phone layout, style.css max-width 600px) draws every figure's text at
  // 14 px or more, as the page's own text: ticks, legends, annotations, a label's <sup>; a
  // tick-by-tick axis is thinned (thinTicks) rather than its labels run into each other.
  var PHONE_MIN_PX = 14;
  var PHONE = window.matchMedia ? window.matchMedia("(max-width: 600px)") : null;
  function phone() { return !!(PHONE && PHONE.matches); }
  function phoneFonts(v, key) { return scaledFonts(v, key, 1, PHONE_MIN_PX); }
  function phoneLayout(layout) {
    var out = phoneFonts(layout, "");
    out.font = Object.assign({}, out.font || {});
    if (!(out.font.size >= PHONE_MIN_PX)) out.font.size = PHONE_MIN_PX;
    // a power of ten's exponent is drawn at 70% of its tick's size (Plotly's <sup>)
    Object.keys(out).forEach(function (k) {
      var ax = out[k];
      if (!/^[xy]axis\d*$/.test(k) || !ax || ax.exponentformat !== "power") return;
      var tick = (ax.tickfont && ax.tickfont.size) || out.font.size;
      out[k] = Object.assign({}, ax, { tickfont: Object.assign({}, ax.tickfont || {},
        { size: Math.max(tick, Math.ceil(PHONE_MIN_PX / 0.7)) }) });
    });
    return out;
  }
  function presentLayout(layout) {
    var out = bigFonts(layout, "");
    out.font = Object.assign({}, out.font || {});
    if (out.font.size === undefined) out.font.size = Math.round(12 * PRESENT_SCALE);
    // a thumbnail (the overview's attention pattern: a few dozen pixels tall, its margins too
    // small for plotly to grow them) gets a foot as tall as its larger tick labels, and grows by
    // as much: they were cut at the bottom
    var xa = out.xaxis || {};
    if (out.height && out.height < 100 && out.margin && xa.visible !== false &&
        xa.showticklabels !== false) {
      var tick = (xa.tickfont && xa.tickfont.size) || out.font.size;
      var foot = Math.ceil(tick * 1.6) - (out.margin.b || 0);
      if (foot > 0) {
        out.margin = Object.assign({}, out.margin, { b: (out.margin.b || 0) + foot });
        out.height += foot;
      }
      // and sides as wide as half a two-digit label: the first tick ("0") stuck out at the left
      var side = Math.ceil(tick * 0.7);
      out.margin = Object.assign({}, out.margin, { l: Math.max(out.margin.l || 0, side),
                                                    r: Math.max(out.margin.r || 0, side) });
    }
    // labels placed in pixels above the plot (the roofline's phases: yshift rows in a top
    // margin of their height) get rows of the larger type's height: cut off at the top before
    if ((out.annotations || []).some(function (a) { return a.yshift; })) {
      out.annotations = out.annotations.map(function (a) {
        return a.yshift ? Object.assign({}, a, { yshift: Math.round(a.yshift * PRESENT_SCALE) }) : a;
      });
      out.shapes = (out.shapes || []).map(function (sh) {
        return sh.ysizemode !== "pixel" ? sh : Object.assign({}, sh, {
          y0: Math.round(sh.y0 * PRESENT_SCALE), y1: Math.round(sh.y1 * PRESENT_SCALE) });
      });
      if (out.margin && out.margin.t) {
        var t = Math.round(out.margin.t * PRESENT_SCALE);
        if (out.height) out.height += t - out.margin.t;
        out.margin = Object.assign({}, out.margin, { t: t });
      }
    }
    return out;
  }

  // An axis labelled tick by tick (tickmode "array": a prompt's tokens) writes every label:
  // at the projector's type a long prompt's labels ran into each other. Drawn, every k-th is
  // kept, k the fewest at which a label's line fits between two (y) or its longest text (x).
  function thinTicks(el, layout) {
    var full = el._fullLayout, update = {};
    if (!full) return;
    Object.keys(layout).forEach(function (k) {
      var m = /^([xy])axis\d*$/.exec(k), ax = layout[k], fa = full[k];
      if (!m || !ax || ax.tickmode !== "array" || !Array.isArray(ax.tickvals) ||
          ax.tickvals.length < 3 || !fa || !fa._length) return;
      var size = (ax.tickfont && ax.tickfont.size) || (layout.font && layout.font.size) || PRESENT_MIN_PX;
      var text = ax.ticktext || ax.tickvals, pitch = fa._length / ax.tickvals.length, need;
      if (m[1] === "y" || (ax.tickangle !== undefined && Math.abs(ax.tickangle) === 90)) need = 1.15 * size;
      else {
        measure.font = size + "px " + ((layout.font && layout.font.family) || "sans-serif");
        need = 8 + Math.max.apply(null, text.map(function (t) {
          return measure.measureText(String(t).replace(/<[^>]*>/g, "")).width; }));
        if (ax.tickangle === undefined || ax.tickangle === "auto") need = Math.min(need, 1.6 * size);
      }
      var every = Math.ceil(need / pitch);
      if (every <= 1) return;
      update[k + ".tickvals"] = ax.tickvals.filter(function (v, i) { return i % every === 0; });
      if (ax.ticktext) update[k + ".ticktext"] = ax.ticktext.filter(function (v, i) { return i % every === 0; });
    });
    if (Object.keys(update).length) return Plotly.relayout(el, update);
  }
  window.Explainer.figureStyle = {
    themedJSON: themedJSON, themed: themed, wrapTitle: wrapTitle, wrapAxisTitles: wrapAxisTitles,
    presenting: presenting, bigFonts: bigFonts, presentLayout: presentLayout, thinTicks: thinTicks,
    phone: phone, phoneQuery: PHONE, phoneFonts: phoneFonts, phoneLayout: phoneLayout
  };
})();
