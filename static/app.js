// The figures and controls of the page. htmx does the requests and swaps (and a section that
// reads another's parameters follows it through an event the server names: web/core/registry.py's
// refresh_trigger); this draws the Plotly figures found in new content (their JSON is in a
// data-figure attribute, built by the server) and mirrors range sliders into their <output>
// while they move. learn.js, overview.js and classroom.js are the page's other scripts.
(function () {
  "use strict";
  var PLOT_CONFIG = { responsive: true, displaylogo: false, displayModeBar: false };

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

  // Presentation mode (static/learn.js) draws the figures for a projector: every font of the
  // figure's layout and traces 1.3 times the page's, none under 18 px (its ticks, legend,
  // labels and titles), and the slide's figure at the height learn.js left it
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
  function bigFonts(v, key) {
    if (Array.isArray(v)) return v.map(function (x) { return bigFonts(x, key); });
    if (typeof v === "string") {   // a label's own smaller size (<span style="font-size:11px">, <sup>)
      if (v.indexOf("<sup>") >= 0) {
        v = v.replace(/<sup>/g, '<span style="font-size:' + PRESENT_MIN_PX + 'px">').replace(/<\/sup>/g, "</span>");
      }
      return v.indexOf("font-size") < 0 ? v : v.replace(/font-size:\s*([\d.]+)px/g, function (m, n) {
        return "font-size:" + Math.max(PRESENT_MIN_PX, Math.round(n * PRESENT_SCALE)) + "px";
      });
    }
    if (!v || typeof v !== "object" || v.bdata) return v;
    var out = {};
    Object.keys(v).forEach(function (k) { out[k] = bigFonts(v[k], k); });
    if (/font$/i.test(key || "") && v.size !== undefined) {
      var big = function (n) { return Math.max(PRESENT_MIN_PX, Math.round(n * PRESENT_SCALE)); };
      out.size = Array.isArray(v.size) ? v.size.map(big) : big(v.size);
    }
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

  // Plotly.react on the element already on the page redraws only what changed; uirevision
  // keeps the reader's zoom and pan across updates. A figure whose JSON is the one already
  // drawn is left alone. force: redraw anyway (a theme change). A figure inside a closed
  // disclosure is drawn when the disclosure opens: nobody sees it before, and it has no width
  // to fit yet.
  function draw(el, force) {
    if (typeof Plotly === "undefined") return;
    if (el.closest("details:not([open])")) return;
    var json = el.getAttribute("data-figure");
    var present = presenting(el), key = present ? json + "@present" + (el._slideHeight || "") : json;
    if (!force && el._drawn === key) return;
    var fig;
    try { fig = JSON.parse(themedJSON(json)); } catch (e) { return; }
    var data = fig.data || [];
    if (present) data = bigFonts(data, "");
    var layout = themed(fig.layout || {});
    if (present) layout = presentLayout(layout);
    layout = wrapAxisTitles(wrapTitle(layout, el.clientWidth), el.clientWidth);
    if (present && el._slideHeight) layout = Object.assign({}, layout, { height: el._slideHeight });
    if (layout.uirevision === undefined) layout = Object.assign({}, layout, { uirevision: "keep" });
    var drawn = Plotly.react(el, data, layout, PLOT_CONFIG);
    if (present && drawn && drawn.then) drawn.then(function () { return thinTicks(el, layout); }).catch(function () {});
    el._drawn = key;
  }
  window.explainerDraw = function (el) { draw(el, true); };  // learn.js: theme changes

  // --- figures survive a swap -----------------------------------------------------------------
  // When htmx replaces a section or a part of it, each figure already drawn there is kept: the
  // element of the new content takes its place's attributes and is swapped for the old element,
  // which Plotly then updates in place (no new plot, hover and zoom kept). Figures are matched by
  // id, else by their order within their section.
  var kept = {};
  function plotKey(el, i) {
    var section = el.closest("section.section");
    return el.id || ((section ? section.id : "") + "/" + i);
  }
  function sectionPlots(section) {
    return section ? Array.prototype.slice.call(section.querySelectorAll("[data-figure]")) : [];
  }
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || !event.detail.shouldSwap) return;
    var sections = target.matches("section.section") ? [target]
        : Array.prototype.slice.call(target.querySelectorAll("section.section"));
    var inside = target.closest("section.section");
    if (inside && sections.indexOf(inside) < 0) sections.push(inside);
    kept = {};
    sections.forEach(function (section) {
      sectionPlots(section).forEach(function (el, i) {
        if (el._drawn !== undefined && target.contains(el)) kept[plotKey(el, i)] = el;
      });
    });
    // The kept figures leave the page before the swap: htmx walks every element it removes
    // (two cleanup events each), and a figure's SVG is most of a part's elements (963 of the
    // feed-forward token part's 1,446). adopt() puts each back in place of its new copy.
    Object.keys(kept).forEach(function (key) { kept[key].remove(); });
  });
  function adopt(root) {
    var sections = [], adopted = [];
    var own = root.closest && root.closest("section.section");
    if (own) sections.push(own);
    else root.querySelectorAll("section.section").forEach(function (s) { sections.push(s); });
    sections.forEach(function (section) {
      sectionPlots(section).forEach(function (el, i) {
        var old = kept[plotKey(el, i)];
        if (!old || old === el || old.isConnected) return;
        Array.prototype.slice.call(old.attributes).forEach(function (a) {
          if (!el.hasAttribute(a.name)) old.removeAttribute(a.name);
        });
        Array.prototype.slice.call(el.attributes).forEach(function (a) {
          old.setAttribute(a.name, a.value);
        });
        // the new copy's class has not Plotly's: without js-plotly-plot, Plotly's own CSS no
        // longer lays its SVG layers over each other, and a figure not drawn again (its JSON
        // unchanged) had its title, axis titles and legend below the plot, over what follows
        old.classList.add("js-plotly-plot");
        el.replaceWith(old);
        adopted.push(old);
      });
    });
    return adopted;
  }

  // A control outside the swapped region (the prompt box) learns from its message whether
  // it is invalid: the server writes the message, this keeps aria-invalid in step with it.
  function markInvalid() {
    document.querySelectorAll("[aria-describedby^='error-']").forEach(function (control) {
      var message = document.getElementById(control.getAttribute("aria-describedby"));
      if (message && message.textContent.trim()) control.setAttribute("aria-invalid", "true");
      else control.removeAttribute("aria-invalid");
    });
  }

  // once per swap, not per piece of it that loads (a part's children, each message out of
  // band): the query walks the whole page
  var marking = false;
  function markInvalidSoon() {
    if (marking) return;
    marking = true;
    Promise.resolve().then(function () { marking = false; markInvalid(); });
  }

  function init(root) {
    markInvalidSoon();
    // a part's content swapped in (innerHTML) loads child by child: the first child's load
    // adopts every kept figure of the section, so the figures adopted are drawn here
    var plots = adopt(root);
    if (root.matches && root.matches("[data-figure]") && root.isConnected) plots.push(root);
    root.querySelectorAll("[data-figure]").forEach(function (el) {
      if (plots.indexOf(el) < 0) plots.push(el);
    });
    plots.forEach(function (el) { draw(el); });     // not forEach(draw): its index would force
    var boxes = root.matches && root.matches(".grows") ? [root] : [];
    root.querySelectorAll(".grows").forEach(function (el) { boxes.push(el); });
    boxes.forEach(keepInView);
  }

  // A list that scrolls in its own box (.grows: a long prompt's chips) shows the token in
  // question, the one clicked or the one just chosen, in its middle. Only the box scrolls,
  // never the page.
  function keepInView(box) {
    var item = box.querySelector('[aria-pressed="true"], .chip.new');
    if (!item || box.scrollHeight <= box.clientHeight) return;
    var offset = item.getBoundingClientRect().top - box.getBoundingClientRect().top;
    box.scrollTop += offset - (box.clientHeight - item.offsetHeight) / 2;
  }

  document.addEventListener("toggle", function (event) {
    var d = event.target;
    if (d.open && d.matches && d.matches("details")) d.querySelectorAll("[data-figure]").forEach(function (el) { draw(el); });
  }, true);

  document.addEventListener("input", function (event) {
    var el = event.target;
    if (!el.id) return;
    document.querySelectorAll('output[data-mirror="' + el.id + '"]').forEach(function (out) {
      out.value = el.value;
    });
  });

  if (typeof htmx !== "undefined") {
    htmx.onLoad(init);            // runs for the first page too, and after every swap
  } else {
    document.addEventListener("DOMContentLoaded", function () { init(document.body); });
  }
})();

// ---- generation loop: streaming ---------------------------------------------------------
// The Generate button of the generation-loop section reads /generate/stream (Server-Sent
// Events) with fetch, so a refusal (4xx/503) shows its message and Stop can abort the request;
// aborting closes the connection, and the server stops generating. Token text goes in with
// textContent only: it is model output, never markup.
(function () {
  "use strict";
  var running = null;            // {controller, box} of the stream in progress

  function parseEvents(buffer, onEvent) {   // -> the unfinished tail of buffer
    var parts = buffer.split("\n\n");
    var tail = parts.pop();
    parts.forEach(function (block) {
      var name = "message", data = [];
      block.split("\n").forEach(function (line) {
        if (line.indexOf("event: ") === 0) name = line.slice(7);
        else if (line.indexOf("data: ") === 0) data.push(line.slice(6));
      });
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    });
    return tail;
  }

  function ms(x) { return x === null ? "–" : x.toFixed(2) + " ms"; }

  function start(button) {
    var section = button.closest("section");
    var out = section.querySelector(".stream-out");
    var status = section.querySelector(".stream-status");
    var list = section.querySelector(".stream-tokens");
    var stop = section.querySelector(".gen-stop");
    if (running) running.controller.abort();
    var controller = new AbortController();
    var me = { controller: controller };
    running = me;
    out.textContent = "";
    list.textContent = "";
    status.textContent = "Prefill: reading the prompt…";
    button.disabled = true;
    stop.disabled = false;
    var count = 0;
    var finished = false;

    function end(message) {
      finished = true;
      status.textContent = message;
      button.disabled = false;
      stop.disabled = true;
      if (running === me) running = null;
    }

    function onEvent(name, d) {
      if (name === "token") {
        count += 1;
        var span = document.createElement("span");
        span.className = "streamed";
        span.textContent = d.text;
        out.appendChild(span);
        var li = document.createElement("li");
        var text = document.createElement("q");
        text.className = "pair";
        text.textContent = d.eos ? "end of text" : d.text;
        li.appendChild(text);
        li.appendChild(document.createTextNode(" " + ms(d.ms) +
            (d.phase === "prefill" ? " (prefill of the prompt + first token)" : "")));
        list.appendChild(li);
        status.textContent = count + (count === 1 ? " token" : " tokens") + " so far";
      } else if (name === "done") {
        var why = { eos: "the model chose its end-of-text token",
                    limit: "the new-token limit was reached",
                    context: "the context window is full" }[d.reason] || d.reason;
        end("Done: " + d.n_tokens + " tokens; stopped because " + why + ". Prefill " +
            ms(d.prefill_ms) + ", then " + ms(d.decode_ms) + " per token (median)" +
            (d.tokens_per_s ? ", " + d.tokens_per_s + " tokens/s of model time." : "."));
      }
    }

    fetch(button.getAttribute("data-stream-url"), {
      signal: controller.signal, headers: { "Accept": "text/event-stream" }
    }).then(function (response) {
      if (!response.ok) {
        return response.json().then(function (body) {
          var errors = body.errors || {};
          end(Object.keys(errors).map(function (k) { return errors[k]; }).join(" ") ||
              "The server refused (" + response.status + ").");
        });
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder("utf-8");
      var buffer = "";
      function pump() {
        return reader.read().then(function (chunk) {
          if (!document.body.contains(out)) { controller.abort(); return; }  // section redrawn
          if (chunk.done) {
            if (!finished) end("The connection ended after " + count + " tokens.");
            return;
          }
          buffer = parseEvents(buffer + decoder.decode(chunk.value, { stream: true }), onEvent);
          return pump();
        });
      }
      return pump();
    }).catch(function (err) {
      if (err.name === "AbortError") {
        if (!finished) end("Stopped after " + count + (count === 1 ? " token" : " tokens") +
                           ". The server stopped generating too.");
      } else if (!finished) {
        end("The stream failed: " + err.message);
      }
    });
    stop.onclick = function () { controller.abort(); };
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".gen-start");
    if (button) start(button);
  });
  window.addEventListener("pagehide", function () { if (running) running.controller.abort(); });

  // ---- the chat section: the same stream, on the chat template's ids (/chat/stream) ----------
  // Each answer token is a chip (its text as pieces, its id); a click shows that step: the
  // context it read and its five most probable tokens. The stop says which token stopped it.
  function chipOf(pieces, id, special) {
    var li = document.createElement("li");
    li.className = "chip c" + Math.floor(((id * 2654435761) % 4294967296) * 6 / 4294967296) +
                   (special ? " special" : "");
    var tok = document.createElement("span");
    tok.className = "tok";
    pieces.forEach(function (p) {
      if (p[0] === "text") { tok.appendChild(document.createTextNode(p[1])); return; }
      var m = document.createElement("span");
      m.className = "mark " + p[0];
      m.textContent = p[1];
      tok.appendChild(m);
    });
    var tid = document.createElement("span");
    tid.className = "tid";
    tid.textContent = String(id);
    li.appendChild(tok);
    li.appendChild(tid);
    return li;
  }

  function showStep(panel, d) {
    panel.textContent = "";
    var h = document.createElement("p");
    h.className = "chat-step-h";
    h.textContent = "Step " + d.i + " (" + (d.phase === "prefill" ?
        "prefill: the whole chat read at once" : "decode: one new token read") + "), " +
        d.n_context + " tokens of context, model pass " + ms(d.ms) + ". Chosen: id " + d.id +
        ", p = " + d.prob.toFixed(4) + ". The five most probable next tokens:";
    panel.appendChild(h);
    var ol = document.createElement("ol");
    ol.className = "chat-top";
    d.top.forEach(function (t) {
      var li = document.createElement("li");
      var chips = document.createElement("ol");
      chips.className = "chips small";
      chips.appendChild(chipOf(t.pieces, t.id, false));
      li.appendChild(chips);
      li.appendChild(document.createTextNode(" p = " + t.prob.toFixed(4) +
                                             (t.id === d.id ? "  (chosen)" : "")));
      ol.appendChild(li);
    });
    panel.appendChild(ol);
    panel.hidden = false;
  }

  function startChat(button) {
    var box = button.closest("section");
    var out = box.querySelector(".chat-out");
    var list = box.querySelector(".chat-tokens");
    var status = box.querySelector(".chat-status");
    var panel = box.querySelector(".chat-step");
    var stop = box.querySelector(".chat-stop");
    var eosText = button.getAttribute("data-eos-text");
    var eosId = button.getAttribute("data-eos-id");
    if (running) running.controller.abort();
    var controller = new AbortController();
    var me = { controller: controller };
    running = me;
    out.textContent = "";
    list.textContent = "";
    panel.hidden = true;
    panel.textContent = "";
    status.textContent = "Prefill: reading the whole chat…";
    button.disabled = true;
    stop.disabled = false;
    var count = 0, finished = false, last = null;

    function end(message) {
      finished = true;
      status.textContent = message;
      button.disabled = false;
      stop.disabled = true;
      if (running === me) running = null;
    }

    function onEvent(name, d) {
      if (name === "token") {
        count += 1;
        last = d;
        out.appendChild(document.createTextNode(d.text));
        var li = chipOf(d.pieces, d.id, d.special);
        li.tabIndex = 0;
        li.setAttribute("role", "button");
        li.setAttribute("aria-label", "Step " + d.i + ": token " + d.id);
        li.addEventListener("click", function () { showStep(panel, d); });
        li.addEventListener("keydown", function (e) {
          if (e.key === "Enter" || e.key === " ") { e.preventDefault(); showStep(panel, d); }
        });
        list.appendChild(li);
        status.textContent = count + (count === 1 ? " token" : " tokens") + " so far";
      } else if (name === "done") {
        var why;
        if (d.reason === "eos") {
          why = "Stopped by " + (eosText || "its end-of-sequence token") + " (id " + eosId +
                "): the model chose its end-of-turn token, the end-of-sequence token its file " +
                "names, which the template writes after every turn" +
                (last ? " (p = " + last.prob.toFixed(4) + ")." : ".");
        } else if (d.reason === "limit") {
          why = "Stopped by the new-token limit (" + d.n_tokens + " tokens): the model had not " +
                "yet chosen " + (eosText || "its end-of-turn token") + ".";
        } else if (d.reason === "context") {
          why = "Stopped: the context window is full.";
        } else {
          why = "Stopped: " + d.reason + ".";
        }
        end(why + " " + d.n_tokens + " tokens; prefill " + ms(d.prefill_ms) + ", then " +
            ms(d.decode_ms) + " per token (median).");
      }
    }

    // the question, system message and limit as they are in their boxes now (the button is
    // outside the part that typing redraws)
    var url = new URL(button.getAttribute("data-stream-url"), window.location.href);
    ["chat_q", "chat_sys", "chat_max"].forEach(function (name) {
      var field = box.querySelector('[name="' + name + '"]');
      if (field) url.searchParams.set(name, field.value);
    });
    fetch(url.toString(), {
      signal: controller.signal, headers: { "Accept": "text/event-stream" }
    }).then(function (response) {
      if (!response.ok) {
        return response.json().then(function (body) {
          var errors = body.errors || {};
          end(Object.keys(errors).map(function (k) { return errors[k]; }).join(" ") ||
              "The server refused (" + response.status + ").");
        });
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder("utf-8");
      var buffer = "";
      function pump() {
        return reader.read().then(function (chunk) {
          if (!document.body.contains(out)) { controller.abort(); return; }  // section redrawn
          if (chunk.done) {
            if (!finished) end("The connection ended after " + count + " tokens.");
            return;
          }
          buffer = parseEvents(buffer + decoder.decode(chunk.value, { stream: true }), onEvent);
          return pump();
        });
      }
      return pump();
    }).catch(function (err) {
      if (err.name === "AbortError") {
        if (!finished) end("Stopped after " + count + (count === 1 ? " token" : " tokens") +
                           " by you (Stop). The server stopped generating too.");
      } else if (!finished) {
        end("The stream failed: " + err.message);
      }
    });
    stop.onclick = function () { controller.abort(); };
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".chat-start");
    if (button) startChat(button);
  });

})();

// --- A request the server could not answer is said so: the page's one error handler ---------
// The server answers 503 with a plain-text message at once when it is overloaded (web/core/limits.py);
// htmx does not swap 5xx answers, so without this a busy server would look like nothing
// happened. The page's status line says it; a section's placeholder that failed to load says it
// in place, and tries again when a busy server says when (Retry-After). Messages are set as
// text, never as HTML. (overview.js ends Play on a failed step: its own concern.)
(function () {
  "use strict";
  function say(text) {
    var line = document.getElementById("server-status");
    if (line) line.textContent = text;
  }
  function lazy(elt, message, retryAfter) {
    if (window.explainerLazyFailed) window.explainerLazyFailed(elt, message, retryAfter);
  }
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var plain = (xhr.getResponseHeader("Content-Type") || "").indexOf("text/plain") === 0;
    var text = plain && xhr.responseText ? xhr.responseText : "";
    say(text || "The server could not answer this request (HTTP " + xhr.status + "). Try again.");
    lazy(event.detail.elt, text || "This section could not be computed (HTTP " + xhr.status + ").",
         xhr.status === 503 ? Number(xhr.getResponseHeader("Retry-After")) || 2 : 0);
  });
  document.addEventListener("htmx:sendError", function (event) {
    say("The server could not be reached. Check the connection, then try again.");
    lazy(event.detail.elt, "The server could not be reached.");
  });
  document.addEventListener("htmx:timeout", function (event) {
    say("The server took too long to answer. Try again.");
    lazy(event.detail.elt, "The server took too long to answer.");
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var xhr = event.detail.xhr;
    if (xhr && xhr.status > 0 && xhr.status < 500) say("");
  });
})();

// ---- scrollable boxes: reachable by keyboard -----------------------------------------------
// A table wider or taller than its box scrolls inside it. A keyboard user can scroll it only
// if the box can take the focus, so such a box becomes a focusable region named after what it
// holds (WCAG 2.1.1; axe's scrollable-region-focusable). Boxes that fit are left alone.
(function () {
  "use strict";
  var BOXES = ".scroll, .table-scroll, .att-scroll";
  function name(box) {
    var inner = box.querySelector("[aria-label], caption, h3, h4");
    var text = inner && (inner.getAttribute("aria-label") || inner.textContent.trim());
    return (text ? text.slice(0, 80) : "Table") + " (scrolls)";
  }
  function mark(box) {
    var scrolls = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
    if (scrolls && !box.hasAttribute("tabindex")) {
      box.setAttribute("tabindex", "0");
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", name(box));
    } else if (!scrolls && box.getAttribute("role") === "region") {
      box.removeAttribute("tabindex");
      box.removeAttribute("role");
      box.removeAttribute("aria-label");
    }
  }
  function init(root) {
    var boxes = root.matches && root.matches(BOXES) ? [root] : [];
    root.querySelectorAll(BOXES).forEach(function (b) { boxes.push(b); });
    boxes.forEach(mark);
  }
  if (typeof htmx !== "undefined") htmx.onLoad(init);
  window.addEventListener("resize", function () { init(document.body); });
})();

// ---- controls that answer at once, sections computed when they near the screen --------------
(function () {
  "use strict";
  if (typeof htmx === "undefined") return;

  // A range slider (data-slide) fires `slide`, its htmx trigger: at once on a key step or the
  // first move, then at most every THROTTLE_MS while it is dragged, and on release with the final
  // value. A value already sent is not sent again. With hx-sync="this:queue last" at most one
  // request per slider is in flight and the last value always follows.
  var THROTTLE_MS = 100;
  var sliders = new WeakMap();
  function slider(el) {
    var s = sliders.get(el);
    if (!s) { s = { sent: el.getAttribute("value"), at: 0, timer: null }; sliders.set(el, s); }
    return s;
  }
  function fire(el) {
    var s = slider(el);
    if (s.timer) { clearTimeout(s.timer); s.timer = null; }
    if (String(el.value) === String(s.sent)) return;
    s.sent = el.value;
    s.at = Date.now();
    htmx.trigger(el, "slide");
  }
  document.addEventListener("input", function (event) {
    var el = event.target;
    if (!el.matches || !el.matches("input[data-slide]")) return;
    var s = slider(el), wait = s.at + THROTTLE_MS - Date.now();
    if (wait <= 0) fire(el);
    else if (!s.timer) s.timer = setTimeout(function () { s.timer = null; fire(el); }, wait);
  });
  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el.matches && el.matches("input[data-slide]")) fire(el);
  });

  // Sections below the fold are placeholders (data-lazy) until they come within NEAR_PX of the
  // screen; then `near` makes htmx fetch them. The tour and presentation mode scroll to a
  // section, which loads it the same way; loadAll() fetches every one (printing).
  var NEAR_PX = 900;
  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      if (e.isIntersecting) { observer.unobserve(e.target); load(e.target); }
    });
  }, { rootMargin: NEAR_PX + "px 0px" }) : null;
  function load(el) {
    if (el.isConnected && el.hasAttribute("data-lazy") && !el._loading) {
      el._loading = true;
      htmx.trigger(el, "near");
    }
  }
  function watch(root) {
    var els = root.matches && root.matches("[data-lazy]") ? [root] : [];
    root.querySelectorAll("[data-lazy]").forEach(function (el) { els.push(el); });
    els.forEach(function (el) { if (observer) observer.observe(el); else load(el); });
  }
  htmx.onLoad(watch);
  window.explainerLoadAll = function () {
    var pending = document.querySelectorAll("[data-lazy]");
    pending.forEach(load);
    return pending.length;
  };
  window.addEventListener("beforeprint", window.explainerLoadAll);

  // A placeholder whose load failed (4xx it cannot show, 503, a timeout, no network) says so in
  // place, with a button that tries again.
  // A busy server (503) names when to come back (Retry-After): the placeholder tries again by
  // itself then, up to RETRIES times, and after that waits for the button.
  var RETRIES = 3;
  function failed(el, message, retryAfter) {
    if (!el || !el.hasAttribute || !el.hasAttribute("data-lazy")) return;
    el._loading = false;
    var box = el.querySelector(".lazy-failed");
    if (!box) return;
    box.querySelector(".lazy-message").textContent = message;
    box.hidden = false;
    el._tries = (el._tries || 0) + 1;
    if (retryAfter && el._tries <= RETRIES) {
      setTimeout(function () { box.hidden = true; load(el); }, retryAfter * 1000);
    }
  }
  window.explainerLazyFailed = failed;     // the page's one error handler (above) calls it
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".lazy-retry");
    if (!button) return;
    var el = button.closest("[data-lazy]");
    button.parentNode.hidden = true;
    load(el);
  });

  // A new prompt recomputes the sections that are loaded and near the screen (X-Sections); the
  // others go back to placeholders and are computed again when they are reached.
  function near(el) {
    var r = el.getBoundingClientRect(), h = window.innerHeight || 800;
    return r.bottom > -NEAR_PX && r.top < h + NEAR_PX;
  }
  // Every request is numbered as it is sent. An answer is dropped when a newer request was sent
  // for the same target, or a newer prompt for the whole page, so a slow answer never overwrites
  // a newer one (two controls that update the same part, a control answered after a new prompt).
  var sentNo = 0, latestFor = {}, latestPrompt = 0;
  function isPrompt(path) { return path === "/" || path.indexOf("/?") === 0; }
  document.addEventListener("htmx:configRequest", function (event) {
    var cfg = event.detail;
    sentNo += 1;
    if (isPrompt(cfg.path)) {
      latestPrompt = sentNo;
      var ids = [];
      document.querySelectorAll("#sections > section.section").forEach(function (s) {
        if (!s.hasAttribute("data-lazy") && near(s)) ids.push(s.id);
      });
      cfg.headers["X-Sections"] = ids.join(",");
    }
    var target = cfg.target && cfg.target.id;
    if (target) latestFor[target] = sentNo;
    cfg.headers["X-Request-No"] = String(sentNo);
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var cfg = event.detail.requestConfig || {};
    var no = Number((cfg.headers || {})["X-Request-No"] || 0);
    var target = event.detail.target && event.detail.target.id;
    if (!no) return;
    if ((target && no < (latestFor[target] || 0)) || (!isPrompt(cfg.path || "") && no < latestPrompt)) {
      event.detail.shouldSwap = false;
    }
  }, true);
})();

// ---- Enter in a section's box sends that box alone -------------------------------------------
// Every control sits inside the page's form, so Enter would submit it and recompute every loaded
// section. In a section's own box, Enter sends that control's change instead.
(function () {
  "use strict";
  document.addEventListener("keydown", function (event) {
    var el = event.target;
    if (event.key !== "Enter" || !el.matches || !el.matches("section.section input")) return;
    if (el.type === "submit" || el.type === "button") return;
    event.preventDefault();
    el.dispatchEvent(new Event("change", { bubbles: true }));
  });
})();

// --- Suggested prompts (the model's own, under the prompt box): a click puts the prompt in the
// box and runs it, as typing it and pressing Run would.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.suggest");
    if (!button) return;
    var box = document.getElementById("prompt-input");
    var form = document.getElementById("state");
    if (!box || !form) return;
    box.value = button.getAttribute("data-prompt");
    form.requestSubmit();
  });
})();

// --- The slim map of sections sticks to the top of the window: what scrolls into view stops
// below it (static/style.css: scroll-padding-top from --ov-map-h), at whatever height its
// names wrap to on this screen.
(function () {
  "use strict";
  function keep(map) {
    var set = function () {
      document.documentElement.style.setProperty("--ov-map-h", map.offsetHeight + "px");
    };
    set();
    if ("ResizeObserver" in window) new ResizeObserver(set).observe(map);
    else window.addEventListener("resize", set);
  }
  function start() { var map = document.getElementById("ov-map"); if (map) keep(map); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

// --- Glossary terms (the `term` macro, templates/macros.html): the definition is already in the
// page; this shows it on keyboard focus, toggles it on a tap or click, hides it on Escape, and
// keeps it inside the window. Hover is CSS alone (static/style.css).
(function () {
  "use strict";
  var pointer = false;          // the focus about to come is a click's or a tap's, not a Tab's
  function termOf(el) { return el && el.closest ? el.closest(".term") : null; }
  function place(term) {
    var def = term.querySelector(".term-def");
    if (!def) return;
    def.style.left = "";
    var margin = 8, box = def.getBoundingClientRect(), width = document.documentElement.clientWidth;
    var shift = 0;
    if (box.right > width - margin) shift = width - margin - box.right;
    if (box.left + shift < margin) shift = margin - box.left;
    if (shift) def.style.left = shift + "px";
  }
  function show(term, on) {
    term.classList.toggle("open", on);
    term.classList.toggle("shut", !on);
    var b = term.querySelector(".term-btn");
    if (b) b.setAttribute("aria-expanded", on ? "true" : "false");
    if (on) place(term);
  }
  document.addEventListener("pointerdown", function () { pointer = true; }, true);
  document.addEventListener("keydown", function () { pointer = false; }, true);
  document.addEventListener("focusin", function (e) {
    var t = termOf(e.target);
    if (t && !pointer) show(t, true);
  });
  document.addEventListener("focusout", function (e) {
    var t = termOf(e.target);
    if (!t || t.contains(e.relatedTarget)) return;
    t.classList.remove("open", "shut");
    var b = t.querySelector(".term-btn");
    if (b) b.setAttribute("aria-expanded", "false");
  });
  document.addEventListener("mouseover", function (e) {
    var t = termOf(e.target);
    if (t && !t.classList.contains("open")) place(t);
  });
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest(".term-btn");
    if (b) { show(b.parentNode, !b.parentNode.classList.contains("open")); return; }
    document.querySelectorAll(".term.open").forEach(function (t) { show(t, false); });
  });
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape") return;
    var open = document.querySelectorAll(".term.open, .term:focus-within");
    if (!open.length) return;
    open.forEach(function (t) { show(t, false); });
    e.stopImmediatePropagation();           // Escape hides the definition, not the tour too
  });
})();

// --- The address names the section its state was last changed in -----------------------------
// A control's answer puts the page's state in the address (the server's HX-Push-Url); the
// section the control belongs to is added as the fragment (#tiling), as is the section whose
// "Go deeper" disclosure was opened or closed. A reload or a shared link then opens at that
// section: it is scrolled to when the page starts and kept at the top of the window while the
// sections around it load and grow (they are placeholders until they come near), until the
// reader scrolls, types or clicks (not while the guided tour or presentation mode, which place
// the page themselves, is on). A prompt change (the page's own request) has no fragment.
(function () {
  "use strict";
  var SECTION_PATH = /^\/section\/([A-Za-z0-9_-]+)/;
  function sectionEl(id) {
    var el = id && document.getElementById(id);
    return el && el.matches && el.matches("section.section") ? el : null;
  }
  document.body.addEventListener("htmx:beforeHistoryUpdate", function (event) {
    var d = event.detail, cfg = d.requestConfig || {}, history = d.history;
    var m = SECTION_PATH.exec(cfg.path || "");
    if (!history || !history.path || !m || !sectionEl(m[1])) return;
    history.path = history.path.split("#")[0] + "#" + m[1];
  });
  function mark(id) {
    var url = location.pathname + location.search + "#" + id;
    if (location.hash !== "#" + id) window.history.replaceState(window.history.state, "", url);
  }
  document.addEventListener("click", function (event) {
    var summary = event.target.closest && event.target.closest("details.deeper > summary");
    var section = summary && summary.closest("section.section");
    if (section) mark(section.id);
  });

  // Opening at the section of the fragment.
  var held = null, observer = null;
  // Where a section's top belongs: below the sticky map of sections (the page's
  // scroll-padding-top follows the map's height, but only once the map's own script has set it,
  // so the map is measured here too).
  function below() {
    var pad = parseFloat(getComputedStyle(document.documentElement).scrollPaddingTop) || 0;
    var map = document.getElementById("ov-map");
    if (map && map.offsetHeight && !document.body.classList.contains("present") &&
        getComputedStyle(map).position === "sticky") pad = Math.max(pad, map.offsetHeight);
    return pad;
  }
  function hold() {
    var el = sectionEl(held);
    if (!el) return;
    var off = el.getBoundingClientRect().top - below();
    if (Math.abs(off) > 1) window.scrollBy(0, off);
  }
  function release() {
    held = null;
    if (observer) { observer.disconnect(); observer = null; }
    ["wheel", "touchstart", "keydown", "pointerdown"].forEach(function (type) {
      window.removeEventListener(type, release, true);
    });
    document.body.removeEventListener("htmx:afterSettle", hold);
  }
  function start() {
    var id = location.hash.slice(1);             // a section's id: letters, digits, - and _
    if (!/^[A-Za-z0-9_-]+$/.test(id) || !sectionEl(id)) return;
    // the guided tour and presentation mode place the page themselves (static/learn.js)
    var query = new URLSearchParams(location.search);
    if (["tour", "present"].some(function (k) { return (query.get(k) || "0") !== "0"; })) {
      // The browser jumps to the fragment by itself too, and may do so after the tour placed
      // its step: the fragment leaves the address, and once the page has loaded the tour's
      // step is placed again, unless the reader has moved meanwhile.
      window.history.replaceState(window.history.state, "", location.pathname + location.search);
      var moved = false, mark = function () { moved = true; };
      ["wheel", "touchstart", "keydown", "pointerdown"].forEach(function (type) {
        window.addEventListener(type, mark, { capture: true, once: true });
      });
      window.addEventListener("load", function () {
        var tour = window.explainerTour;
        if (!moved && tour && tour.open()) tour.show(tour.step(), !tour.presenting());
      });
      return;
    }
    held = id;
    if ("scrollRestoration" in window.history) window.history.scrollRestoration = "manual";
    ["wheel", "touchstart", "keydown", "pointerdown"].forEach(function (type) {
      window.addEventListener(type, release, true);
    });
    document.body.addEventListener("htmx:afterSettle", hold);
    if ("ResizeObserver" in window) {
      observer = new ResizeObserver(function () { if (held) hold(); });
      observer.observe(document.getElementById("sections") || document.body);
      if (document.getElementById("ov-map")) observer.observe(document.getElementById("ov-map"));
    }
    hold();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
