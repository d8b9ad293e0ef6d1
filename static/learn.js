// The learning experience: the guided tour, presentation mode, the theme, "copy link",
// predict-then-reveal, and figure exports (PNG by Plotly, CSV from the figure's own data).
// Page-level state lives in hidden inputs of the #state form, so it travels with every htmx
// request, and in the address bar (history.replaceState), so a reload resumes it.
(function () {
  "use strict";

  function $(id) { return document.getElementById(id); }

  function setParam(name, value, fallback) {
    var input = document.querySelector('#state input[type=hidden][name="' + name + '"]');
    if (input) input.value = value;
    var url = new URL(window.location.href);
    if (String(value) === String(fallback)) url.searchParams.delete(name);
    else url.searchParams.set(name, value);
    window.history.replaceState(window.history.state, "", url.toString());
  }

  // --- the guided tour -----------------------------------------------------------------------
  function steps() { return Array.prototype.slice.call(document.querySelectorAll("#tour .tour-step")); }
  function tourOpen() { var t = $("tour"); return t && !t.hidden; }
  function currentStep() { return Number(($("tour-bar") || {}).value || 1); }
  function presenting() { return document.body.classList.contains("present"); }

  // The element a step shows. The first step, the prompt, is shown by the overview: the prompt
  // is typed in its Text box, and the whole pass of it is there (one slide when presenting).
  function overview() { return $("overview") || document.querySelector("section.ov"); }
  function stepTarget(n) {
    var li = steps()[n - 1], target = li && li.getAttribute("data-target");
    if (target === "prompt" && overview()) target = overview().id;
    return target;
  }

  function markCurrent() {
    var open = tourOpen(), target = open ? stepTarget(currentStep()) : null;
    document.querySelectorAll(".section").forEach(function (s) {
      s.classList.toggle("current", open && s.id === target);
    });
    fitSlide();
    return target;
  }

  function showStep(n, scroll) {
    var all = steps();
    if (!all.length) return;
    n = Math.max(1, Math.min(all.length, n));
    all.forEach(function (li) { li.hidden = Number(li.getAttribute("data-step")) !== n; });
    $("tour").hidden = false;
    $("tour-bar").value = n;
    $("tour-now").textContent = String(n);
    $("tour-prev").disabled = n === 1;
    $("tour-next").disabled = n === all.length;
    setParam("tour", n, 0);
    if (n !== shownStep) setMore(false, true);
    shownStep = n;
    var target = markCurrent();
    if (scroll !== false && target && $(target)) {
      if (presenting()) window.scrollTo(0, 0);
      else $(target).scrollIntoView({ block: "start" });
    }
  }

  function closeTour() {
    $("tour").hidden = true;
    setParam("tour", 0, 0);
    if (presenting()) setPresent(false);
    markCurrent();
  }

  function setPresent(on) {
    document.body.classList.toggle("present", on);
    if (!on) setMore(false, true);
    $("present-toggle").setAttribute("aria-pressed", on ? "true" : "false");
    setParam("present", on ? 1 : 0, 0);
    // a new presentation starts with every answer hidden again
    if (!on) {
      document.querySelectorAll(".predict[data-shown-in]").forEach(function (box) {
        box.removeAttribute("data-shown-in");
      });
      presentShown = {};
    }
    restorePredictions(document.body);
    if (on && !tourOpen()) showStep(1);
    else markCurrent();
    redrawPlots();
    fitSlide();
    // out of it, every figure drawn while its section was hidden (Plotly's 700 px) fits its box
    // again: a phone's page would be wider than the phone. Resolves once they are.
    return on ? Promise.resolve() : Promise.all(resizePlots(document.body)).catch(function () {});
  }

  // --- presentation mode: each step is a slide made for a projector -----------------------------
  // A slide is its section's idea, at projector sizes (static/style.css: body.present): the
  // heading, the lead's sentences, the prediction's question and one picture (the first figure
  // of the core, or the section's own: SLIDE_PICTURE); the rest of the core is hidden
  // (.slide-off), one key away (M, "More": body.present-more shows it all, and the page
  // scrolls). Nothing is scaled down: the picture's figure is drawn to the height left on the
  // screen (app.js draws it at el._slideHeight, with the presentation's font sizes).
  var SLIDE_PICTURE = { attention: ".att-row", chat: ".chat-text, .chat-none" };
  var PICTURES = ".plot[data-figure], ol.chips, .blk-diagram, .sp-rounds, table";
  var MIN_FIG = 220;                           // px: a figure is not drawn lower than this
  var more = false, shownStep = null;
  function moreShown() { return presenting() && more; }
  function setMore(on, quiet) {
    more = !!on;
    document.body.classList.toggle("present-more", more);
    var b = $("tour-more");
    if (b) b.setAttribute("aria-pressed", more ? "true" : "false");
    if (!quiet) { fitSlide(); if (!more) window.scrollTo(0, 0); }
  }
  function slidePicture(slide) {
    var all = slide.querySelectorAll(SLIDE_PICTURE[slide.id] || PICTURES);
    for (var i = 0; i < all.length; i++) {
      if (!all[i].closest("details.deeper") && all[i].getClientRects().length) return all[i];
    }
    return null;
  }
  // Marks what of the slide's section is not its idea: every element off the paths from the
  // section down to the kept ones (kept elements show whole).
  function markSlide(slide) {
    slide.querySelectorAll(".slide-off").forEach(function (e) { e.classList.remove("slide-off"); });
    if (slide.id === "overview" || moreShown()) return null;
    var picture = slidePicture(slide);
    // a picture blurred until a question elsewhere is answered keeps its note saying why
    var gate = picture && picture.closest(".answer-gate");
    var keep = [slide.querySelector("h2"), slide.querySelector("p.lead"),
                slide.querySelector(".predict"), picture,
                gate && gate.querySelector(":scope > .answer-gate-note")].filter(function (e) {
      return e && !e.closest("details.deeper");
    });
    var path = [];
    keep.forEach(function (k) { for (var e = k; e && e !== slide; e = e.parentElement) path.push(e); });
    [slide].concat(path).forEach(function (e) {
      if (keep.indexOf(e) >= 0) return;
      Array.prototype.forEach.call(e.children, function (c) {
        if (path.indexOf(c) < 0) c.classList.add("slide-off");
      });
    });
    return picture;
  }
  // A picture that scrolls in its own box (.grows: the attention slide's chips) is given the
  // height the screen leaves it, cut between two rows of its items, never through one.
  function fitBox(box) {
    box.classList.add("slide-box");
    box.style.maxHeight = "none";
    var top = box.getBoundingClientRect().top, room = box.getBoundingClientRect().height - excess() - 2;
    if (box.scrollHeight <= room + 1) return;
    var pad = parseFloat(getComputedStyle(box).paddingBottom) || 0, fit = 0;
    Array.prototype.forEach.call(box.children, function (item) {
      var bottom = item.getBoundingClientRect().bottom - top + box.scrollTop + pad;
      if (bottom <= room) fit = Math.max(fit, bottom);
    });
    box.style.maxHeight = (fit > 0 ? fit : Math.max(room, 60)) + "px";   // no whole row fits: cut
  }
  var fitting = false;
  function overflow() { return document.scrollingElement.scrollHeight - window.innerHeight; }
  // How far the page's content runs past the bottom of the window (below 0: room left).
  function excess() {
    var main = document.querySelector("main");
    return main ? main.getBoundingClientRect().bottom + window.scrollY - window.innerHeight : overflow();
  }
  function fitSlide(settled) {
    if (fitting) return;
    fitting = true;
    try {
      document.querySelectorAll(".section.slide-fit").forEach(function (s) {
        s.style.zoom = "";
        s.classList.remove("slide-fit");
        s.querySelectorAll(".slide-off").forEach(function (e) { e.classList.remove("slide-off"); });
        s.querySelectorAll(".slide-box").forEach(function (e) {
          e.classList.remove("slide-box");
          e.style.maxHeight = "";
        });
      });
      var slide = presenting() && document.querySelector(".section.current");
      document.querySelectorAll("[data-figure]").forEach(function (el) {
        if (el._slideHeight && (!slide || !slide.contains(el) || moreShown())) {
          el._slideHeight = null;
          if (window.explainerDraw) window.explainerDraw(el);
        }
      });
      if (!slide) return;
      slide.classList.add("slide-fit");
      slide.removeAttribute("data-fitted");
      var picture = markSlide(slide);
      var figure = picture && picture.matches(".plot[data-figure]") ? picture : null;
      if (picture && !figure && picture.matches(".grows")) fitBox(picture);
      // The slide's figures are drawn again at their boxes' width: a figure drawn while its
      // section was hidden (another slide on screen) got Plotly's default width, 700 px. The
      // slide's figure then takes the height left on the screen.
      if (settled !== true) {
        Promise.all(resizePlots(slide)).then(function () {
          if (presenting() && figure) fitFigure(figure, slide);
          else slide.setAttribute("data-fitted", "");
        }, function () { /* a figure replaced meanwhile: its new one is drawn to fit */ });
      }
    } finally {
      fitting = false;
    }
  }
  // The slide's figure drawn as tall as the screen leaves it (no page scroll), not lower than
  // MIN_FIG; drawn again only when that changes by more than a few pixels.
  // The slide is marked data-fitted once its figure is drawn to its height (tests wait on it).
  function fitFigure(el, slide) {
    var done = function () { slide.setAttribute("data-fitted", ""); };
    if (!el.isConnected || !window.explainerDraw || moreShown()) return done();
    var now = el.getBoundingClientRect().height;
    var want = Math.max(MIN_FIG, Math.floor(now - excess() - 2));
    want = Math.min(want, Math.floor(window.innerHeight * 0.85));
    if (el._slideHeight && Math.abs(want - now) <= 4) return done();
    el._slideHeight = want;
    window.explainerDraw(el);
    window.requestAnimationFrame(function () {
      if (presenting() && el.isConnected && excess() > 2 && want > MIN_FIG) {
        el._slideHeight = Math.max(MIN_FIG, want - excess() - 2);
        window.explainerDraw(el);
      }
      done();
    });
  }
  // Plotly sizes a figure to its box when drawn and on window resizes; a slide's zoom changes
  // the box's width otherwise, so its figures are redrawn at the new size.
  function resizePlots(root) {
    if (typeof Plotly === "undefined" || !Plotly.Plots) return [];
    return Array.prototype.slice.call(root.querySelectorAll(".js-plotly-plot"))
      .filter(function (el) { return el.getClientRects().length; })
      .map(function (el) { return Plotly.Plots.resize(el); });
  }
  var refit = null;
  function fitSoon() {
    if (!presenting()) return;
    window.clearTimeout(refit);
    refit = window.setTimeout(fitSlide, 60);
  }
  window.addEventListener("resize", fitSoon);

  // R in presentation mode shows the answers of the current slide's predictions, as each one's
  // "Just show me" does: the room guesses aloud, the presenter reveals.
  function revealSlide() {
    var slide = document.querySelector(".section.current");
    if (!slide) return;
    slide.querySelectorAll(".predict:not(.revealed)").forEach(function (box) { reveal(box, NO_GUESS); });
    slide.querySelectorAll(".gated[data-answer-of]").forEach(function (el) {
      showAnswer(el.getAttribute("data-answer-of"), el.getAttribute("data-answer"), NO_GUESS);
    });
    fitSlide();
  }

  // --- theme ---------------------------------------------------------------------------------
  function redrawPlots() {
    if (window.explainerDraw) document.querySelectorAll("[data-figure]").forEach(window.explainerDraw);
  }

  function setTheme(theme) {
    document.documentElement.setAttribute("data-theme", theme);
    setParam("theme", theme, "auto");
    redrawPlots();
  }

  // --- predict, then reveal --------------------------------------------------------------------
  // A guess is kept in this browser under the prediction's key (its id and the model's answer);
  // "Just show me" keeps an empty guess there: the answer was shown without a guess. The answer
  // is shown elsewhere too: the elements named by a prediction's data-gate, and every place
  // marked data-answer-of (the overview's top token before any step, a section's answer_gate),
  // stay blurred until then.
  var NO_GUESS = "";
  var presentShown = {};          // keys revealed during this presentation (none stored)

  function keyOf(id, answer) { return "predict:" + id + ":" + answer; }
  function guessKey(box) { return keyOf(box.getAttribute("data-predict"), box.getAttribute("data-answer")); }
  function saved(key) {
    try { return window.localStorage.getItem(key); } catch (e) { return null; }
  }
  function keep(key, guess) {
    try { window.localStorage.setItem(key, guess); } catch (e) { /* private mode */ }
  }

  function verdict(kind, guess, answer) {
    if (guess === NO_GUESS) return "Shown without a guess.";
    if (kind === "number") {
      var g = Number(guess), a = Number(answer);
      if (!isFinite(g)) return "";
      if (g === a) return "Exactly right.";
      var ratio = a === 0 ? Infinity : g / a;
      return "You were off by a factor of " + (ratio >= 1 ? ratio : 1 / ratio).toPrecision(3) + ".";
    }
    var same = guess.trim().toLowerCase() === String(answer).trim().toLowerCase();
    return same ? "Right!" : "Not this time.";
  }

  // The places that show this answer: the overview's boxes and every section's answer_gate
  // (templates/macros.html; web/presentation/answers.py computes the same key as the question).
  function answerBoxes(id, answer, root) {
    return Array.prototype.slice.call((root || document).querySelectorAll("[data-answer-of]"))
      .filter(function (el) {
        return el.getAttribute("data-answer-of") === id && el.getAttribute("data-answer") === answer;
      });
  }

  function gate(box, closed) {
    (box.getAttribute("data-gate") || "").split(/\s+/).forEach(function (id) {
      var el = id && document.getElementById(id);
      if (el) el.classList.toggle("gated", closed);
    });
    answerBoxes(box.getAttribute("data-predict"), box.getAttribute("data-answer")).forEach(function (el) {
      el.classList.toggle("gated", closed);
    });
  }

  function reveal(box, guess) {
    gate(box, false);
    var skipped = guess === NO_GUESS;
    box.querySelector(".predict-guess").textContent = guess;
    var you = box.querySelector(".predict-you");
    if (you) you.hidden = skipped;
    box.querySelector(".predict-verdict").textContent =
      verdict(box.getAttribute("data-kind"), guess, box.getAttribute("data-answer"));
    box.querySelector(".predict-reveal").hidden = false;
    box.querySelector(".predict-commit").disabled = true;
    box.querySelectorAll("input").forEach(function (i) { i.disabled = true; });
    box.classList.add("revealed");
    box.classList.toggle("skipped", skipped);
    if (presenting()) {
      box.setAttribute("data-shown-in", "present");
      presentShown[guessKey(box)] = true;
    }
  }

  // The answer of prediction `id` is shown: every box of that prediction on the page says so
  // (without a guess, unless one was made), and every element that shows the answer is unblurred.
  function showAnswer(id, answer, guess) {
    var key = keyOf(id, answer);
    if (presenting()) presentShown[key] = true;
    else if (saved(key) === null) keep(key, guess);
    document.querySelectorAll(".predict[data-predict]").forEach(function (box) {
      if (box.getAttribute("data-predict") === id && box.getAttribute("data-answer") === answer &&
          !box.classList.contains("revealed")) reveal(box, guess);
    });
    answerBoxes(id, answer).forEach(function (el) { el.classList.remove("gated"); });
  }

  function commit(box) {
    var guess;
    if (box.getAttribute("data-kind") === "choice") {
      var picked = box.querySelector("input[type=radio]:checked");
      guess = picked ? picked.value : "";
    } else {
      guess = box.querySelector(".predict-input").value;
    }
    if (!guess.trim()) {
      box.querySelector(".predict-q").classList.add("need-guess");
      return;
    }
    keep(guessKey(box), guess);
    box.setAttribute("data-guess-recorded", "true");
    reveal(box, guess);
    answerBoxes(box.getAttribute("data-predict"), box.getAttribute("data-answer")).forEach(function (el) {
      el.classList.remove("gated");
    });
  }

  function skip(box) {
    if (!presenting()) keep(guessKey(box), NO_GUESS);
    reveal(box, NO_GUESS);
  }

  // A guess kept in this browser reveals its answer when the page loads. Not in presentation
  // mode: the presenter's own earlier guesses would give the answers away to the room; there a
  // prediction shows its answer only once revealed during the presentation (R, or its buttons).
  function restorePredictions(root) {
    root.querySelectorAll(".predict").forEach(function (box) {
      var kept = saved(guessKey(box));
      if (presenting() && box.getAttribute("data-shown-in") !== "present") conceal(box);
      else if (kept !== null && !presenting()) reveal(box, kept);
      else if (!box.classList.contains("revealed")) gate(box, true);
    });
    // the overview's boxes that show an answer: blurred until it is shown, in this browser, or
    // in this presentation
    var boxes = root.matches && root.matches("[data-answer-of]") ? [root] : [];
    root.querySelectorAll("[data-answer-of]").forEach(function (el) { boxes.push(el); });
    boxes.forEach(function (el) {
      var key = keyOf(el.getAttribute("data-answer-of"), el.getAttribute("data-answer"));
      el.classList.toggle("gated", presenting() ? !presentShown[key] : saved(key) === null);
    });
  }

  function conceal(box) {
    gate(box, true);
    box.querySelector(".predict-reveal").hidden = true;
    box.querySelector(".predict-commit").disabled = false;
    box.querySelectorAll("input").forEach(function (i) { i.disabled = false; });
    box.classList.remove("revealed");
  }

  // The overview's own way to its hidden answer: its "show" button, or a step of the loop (Next
  // token, Play), which puts the model's choice on screen anyway.
  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target.closest(".ov-reveal, #ov-next, #ov-play, .answer-reveal") : null;
    if (!t) return;
    if (t.classList.contains("answer-reveal")) {     // a section's place: its own question's answer
      var place = t.closest("[data-answer-of]");
      showAnswer(place.getAttribute("data-answer-of"), place.getAttribute("data-answer"), NO_GUESS);
      return;
    }
    document.querySelectorAll(".ov-gate.gated[data-answer-of]").forEach(function (el) {
      showAnswer(el.getAttribute("data-answer-of"), el.getAttribute("data-answer"), NO_GUESS);
    });
  }, true);

  // --- exports -------------------------------------------------------------------------------
  var TYPED = { f8: Float64Array, f4: Float32Array, i1: Int8Array, u1: Uint8Array,
                i2: Int16Array, u2: Uint16Array, i4: Int32Array, u4: Uint32Array };

  // plotly.py writes NumPy arrays as {dtype, bdata (base64), shape}; lists stay lists.
  function decode(v) {
    if (!v || typeof v !== "object" || Array.isArray(v) || !v.bdata) return v;
    var bin = window.atob(v.bdata), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var flat = Array.prototype.slice.call(new TYPED[v.dtype](bytes.buffer));
    var dims = v.shape ? String(v.shape).split(",").map(Number) : [flat.length];
    if (dims.length !== 2) return flat;
    var rows = [];
    for (var r = 0; r < dims[0]; r++) rows.push(flat.slice(r * dims[1], (r + 1) * dims[1]));
    return rows;
  }

  function cell(v) {
    if (v === null || v === undefined) return "";
    var s = String(v);
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  // One row per point: trace, name, x, y, z, text. A heatmap gives one row per cell.
  function figureCsv(fig) {
    var lines = ["trace,name,x,y,z,text"];
    (fig.data || []).forEach(function (t, n) {
      var x = decode(t.x), y = decode(t.y), z = decode(t.z), text = decode(t.text);
      var name = t.name || t.type || "";
      if (Array.isArray(z) && Array.isArray(z[0])) {
        z.forEach(function (row, i) {
          row.forEach(function (value, j) {
            lines.push([n, name, x ? x[j] : j, y ? y[i] : i, value, ""].map(cell).join(","));
          });
        });
        return;
      }
      var len = Math.max((x || []).length || 0, (y || []).length || 0, (Array.isArray(z) ? z.length : 0));
      for (var k = 0; k < len; k++) {
        lines.push([n, name, x ? x[k] : "", y ? y[k] : "", Array.isArray(z) ? z[k] : "",
                    Array.isArray(text) ? text[k] : (text || "")].map(cell).join(","));
      }
    });
    return lines.join("\n") + "\n";
  }

  function plotName(el, i) {
    var section = el.closest(".section");
    return (section ? section.id : "figure") + "-" + (i + 1);
  }

  function download(filename, text) {
    var url = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
    var a = document.createElement("a");
    a.href = url;
    a.download = filename;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }

  function addExportTools(root) {
    var plots = Array.prototype.slice.call(document.querySelectorAll(".plot[data-figure]"));
    plots.forEach(function (el, i) {
      if (!root.contains(el) && root !== el) return;
      // The figure and its buttons share one box, so that in a grid of figures the buttons sit
      // under their figure instead of taking a cell of their own.
      var box = el.parentElement;
      if (!box.classList.contains("plot-box")) {
        box = document.createElement("div");
        box.className = "plot-box";
        el.insertAdjacentElement("beforebegin", box);
        box.appendChild(el);
      }
      var next = el.nextElementSibling;
      if (next && next.classList.contains("plot-tools")) next.remove();
      var what = el.getAttribute("aria-label") || "this figure";
      var tools = document.createElement("div");
      tools.className = "plot-tools";
      var png = document.createElement("button");
      png.type = "button";
      png.textContent = "PNG";
      png.setAttribute("aria-label", "Download as PNG: " + what);
      png.addEventListener("click", function () {
        if (window.Plotly) window.Plotly.downloadImage(el, { format: "png", filename: plotName(el, i) });
      });
      var csv = document.createElement("button");
      csv.type = "button";
      csv.textContent = "CSV";
      csv.setAttribute("aria-label", "Download the data as CSV: " + what);
      csv.addEventListener("click", function () {
        var fig;
        try { fig = JSON.parse(el.getAttribute("data-figure")); } catch (e) { return; }
        download(plotName(el, i) + ".csv", figureCsv(fig));
      });
      tools.appendChild(png);
      tools.appendChild(csv);
      el.insertAdjacentElement("afterend", tools);
    });
  }

  // --- "Go deeper" disclosures: which are open is page state, in the URL ----------------------
  // The list is kept as a set of ids, not read back from the page: a section not loaded yet
  // keeps the open state the URL gave it.
  document.addEventListener("toggle", function (event) {
    var d = event.target;
    if (!d.matches || !d.matches("details.deeper")) return;
    var input = document.querySelector('#state input[type=hidden][name="open"]');
    var ids = (input && input.value ? input.value.split(",") : []).filter(Boolean);
    var id = d.getAttribute("data-deeper"), at = ids.indexOf(id);
    // a disclosure a swap put in the page open (or shut) fires toggle too: nothing changed
    if (d.open === at >= 0) return;
    if (d.open && at < 0) ids.push(id);
    if (!d.open && at >= 0) ids.splice(at, 1);
    setParam("open", ids.join(","), "");
    // a figure drawn while its disclosure was closed had no width to fit: fit it now
    if (d.open && typeof Plotly !== "undefined") {
      d.querySelectorAll(".js-plotly-plot").forEach(function (el) { Plotly.Plots.resize(el); });
    }
  }, true);

  // --- a table cut by its box says so in words -------------------------------------------------
  // A table wider (or taller) than the box that scrolls it gets a line just above the box: which
  // of its columns (rows) are wholly in view, of how many, and that the rest is a scroll away;
  // a faint shadow at the edge was the only cue, and a cut on a row boundary looks complete.
  var CUT_BOXES = ".table-scroll, .scroll, .att-scroll";
  function wholly(cells, lo, hi, start, end) {
    var seen = [];
    cells.forEach(function (c, i) {
      var r = c.getBoundingClientRect();
      if (r[start] >= lo - 1 && r[end] <= hi + 1) seen.push(i);
    });
    return seen;
  }
  function overflows(el) {
    return el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1 ||
           el.clientHeight > 0 && el.scrollHeight > el.clientHeight + 1;
  }
  function describeCut(box) {
    var table = box.querySelector("table");
    var note = box.previousElementSibling;
    if (note && !note.classList.contains("cut-note")) note = null;
    // on a phone a table scrolls in its own box (style.css: table { display: block }): the
    // wrapper then fits and the table is what is cut
    var scroller = table && !overflows(box) && overflows(table) ? table : box;
    var wide = table && scroller.clientWidth > 0 && scroller.scrollWidth > scroller.clientWidth + 1;
    var tall = table && scroller.clientHeight > 0 && scroller.scrollHeight > scroller.clientHeight + 1;
    if (!wide && !tall) { if (note) note.remove(); return; }
    var at = scroller.getBoundingClientRect(), parts = [];
    if (wide && table.rows.length) {
      var heads = Array.prototype.slice.call(table.rows[0].cells);
      var cols = wholly(heads, at.left, at.right, "left", "right");
      if (cols.length) parts.push("columns " + (cols[0] + 1) + "–" + (cols[cols.length - 1] + 1) +
                                  " of " + heads.length + " in view — scroll sideways for the rest");
    }
    if (tall && table.tBodies.length) {
      var rows = Array.prototype.slice.call(table.tBodies[0].rows);
      var seen = wholly(rows, at.top, at.bottom, "top", "bottom");
      if (seen.length) parts.push("rows " + (seen[0] + 1) + "–" + (seen[seen.length - 1] + 1) +
                                  " of " + rows.length + " in view — scroll down for the rest");
    }
    if (!parts.length) { if (note) note.remove(); return; }
    if (!note) {
      note = document.createElement("p");
      note.className = "cut-note";
      box.insertAdjacentElement("beforebegin", note);
    }
    var text = "Cut to fit: " + parts.join("; ") + ".";
    if (note.textContent !== text) note.textContent = text;
  }
  var cutsQueued = false;
  function describeCuts() {
    if (cutsQueued) return;
    cutsQueued = true;
    window.requestAnimationFrame(function () {
      cutsQueued = false;
      document.querySelectorAll(CUT_BOXES).forEach(describeCut);
    });
  }
  window.addEventListener("resize", describeCuts);
  document.addEventListener("toggle", describeCuts, true);
  document.addEventListener("scroll", function (e) {
    var box = e.target.closest ? e.target.closest(CUT_BOXES) : null;   // the box or its table
    if (box) describeCut(box);
  }, true);

  // --- wiring --------------------------------------------------------------------------------
  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
    if ((e.key === "ArrowRight" || e.key === "PageDown") && tourOpen()) { showStep(currentStep() + 1); e.preventDefault(); }
    else if ((e.key === "ArrowLeft" || e.key === "PageUp") && tourOpen()) { showStep(currentStep() - 1); e.preventDefault(); }
    else if (e.key === "p" || e.key === "P") { setPresent(!presenting()); e.preventDefault(); }
    else if ((e.key === "r" || e.key === "R") && presenting()) { revealSlide(); e.preventDefault(); }
    else if ((e.key === "m" || e.key === "M") && presenting()) { setMore(!more); e.preventDefault(); }
    else if (e.key === "Escape" && tourOpen()) { closeTour(); e.preventDefault(); }
  });

  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target.closest("button") : null;
    if (!t) return;
    if (t.id === "tour-start") showStep(tourOpen() ? currentStep() : 1);
    else if (t.id === "tour-next") showStep(currentStep() + 1);
    else if (t.id === "tour-prev") showStep(currentStep() - 1);
    else if (t.id === "tour-close") closeTour();
    else if (t.id === "present-toggle") setPresent(!presenting());
    else if (t.id === "tour-more") setMore(!more);
    else if (t.id === "copy-link") {
      var status = $("copy-status");
      var done = function () { status.textContent = "Link copied."; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(window.location.href).then(done, function () { status.textContent = window.location.href; });
      } else {
        status.textContent = window.location.href;
      }
    } else if (t.classList.contains("predict-commit")) commit(t.closest(".predict"));
    else if (t.classList.contains("predict-skip")) skip(t.closest(".predict"));
  });

  document.addEventListener("change", function (e) {
    if (e.target.id === "theme-select") setTheme(e.target.value);
  });

  function init(root) {
    addExportTools(root);
    restorePredictions(root);
    markCurrent();
    describeCuts();
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (tourOpen()) showStep(currentStep(), !presenting());
  });
  // classroom.js moves a follower's page to the teacher's slide with these.
  window.explainerTour = { show: showStep, close: closeTour, present: setPresent,
                           presenting: presenting, open: tourOpen, step: currentStep };
  if (typeof htmx !== "undefined") htmx.onLoad(init);
  else document.addEventListener("DOMContentLoaded", function () { init(document.body); });

})();
