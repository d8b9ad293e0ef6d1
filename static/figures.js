// The page's Plotly figures: each element with a data-figure attribute (the figure's JSON, built
// by the server) is drawn when new content loads (htmx.onLoad) or when its closed disclosure
// opens, in the style figure-style.js gives (theme, phone, projector). A figure already drawn
// survives an htmx swap of its section: the old element is kept and updated in place.
// Shared on window.Explainer: draw(el) redraws one figure (present.js, classroom.js),
// drawAll() every one (theme.js, present.js).
(function () {
  "use strict";
  var PLOT_CONFIG = { responsive: true, displaylogo: false, displayModeBar: false };
  var style = window.Explainer.figureStyle;
  var themedJSON = style.themedJSON, themed = style.themed, wrapTitle = style.wrapTitle,
      wrapAxisTitles = style.wrapAxisTitles, presenting = style.presenting,
      bigFonts = style.bigFonts, presentLayout = style.presentLayout, thinTicks = style.thinTicks;
  var phone = style.phone, phoneFonts = style.phoneFonts, phoneLayout = style.phoneLayout;

  // What a figure is drawn from: its JSON and the style it is drawn in.
  function keyOf(el) {
    var json = el.getAttribute("data-figure");
    var present = presenting(el), small = !present && phone();
    return present ? json + "@present" + (el._slideHeight || "") : small ? json + "@phone" : json;
  }
  // Plotly.react on the element already on the page redraws only what changed; uirevision
  // keeps the reader's zoom and pan across updates. A figure whose JSON is the one already
  // drawn is left alone. force: redraw anyway (a theme change). A figure inside a closed
  // disclosure is drawn when the disclosure opens: nobody sees it before, and it has no width
  // to fit yet. width: the element's width, measured beforehand (init measures every figure's
  // before it draws any).
  function draw(el, force, width) {
    if (typeof Plotly === "undefined") return;
    if (later.has(el)) { later.delete(el); nearing.unobserve(el); }
    if (el.closest("details:not([open])")) return;
    var json = el.getAttribute("data-figure");
    var present = presenting(el), small = !present && phone();
    var key = keyOf(el);
    if (!force && el._drawn === key) return;
    if (width === undefined) width = el.clientWidth;
    var fig;
    try { fig = JSON.parse(themedJSON(json)); } catch (e) { return; }
    var data = fig.data || [];
    if (present) data = bigFonts(data, "");
    if (small) data = phoneFonts(data, "");
    var layout = themed(fig.layout || {});
    if (present) layout = presentLayout(layout);
    if (small) layout = phoneLayout(layout);
    layout = wrapAxisTitles(wrapTitle(layout, width), width);
    if (present && el._slideHeight) layout = Object.assign({}, layout, { height: el._slideHeight });
    if (layout.uirevision === undefined) layout = Object.assign({}, layout, { uirevision: "keep" });
    var drawn = Plotly.react(el, data, layout, PLOT_CONFIG);
    if ((present || small) && drawn && drawn.then) drawn.then(function () { return thinTicks(el, layout); }).catch(function () {});
    el._drawn = key;
  }

  // --- a figure far from the screen is redrawn when it nears it -----------------------------
  // A figure drawn before whose new data arrives while it is more than NEAR_PX off the screen
  // (an open "Go deeper" below the control that moved, a section a new prompt recomputed)
  // keeps its drawing until it comes that near: nobody sees it before, and Plotly redrawing
  // every such figure at once made the answer's figures on screen wait for them. Its JSON and
  // label are the new ones meanwhile (the CSV export reads them). Printing draws them first.
  var NEAR_PX = 300;
  var later = new Set();
  var nearing = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { if (e.isIntersecting && later.has(e.target)) draw(e.target); });
  }, { rootMargin: NEAR_PX + "px 0px" }) : null;
  function drawLater(el) {
    later.add(el);
    nearing.observe(el);
  }
  // a figure replaced meanwhile (not kept by a swap) is no longer watched
  document.addEventListener("htmx:afterSettle", function () {
    later.forEach(function (el) {
      if (!el.isConnected) { later.delete(el); nearing.unobserve(el); }
    });
  });
  window.addEventListener("beforeprint", function () {
    later.forEach(function (el) { draw(el); });
  });

  window.Explainer.draw = function (el) { draw(el, true); };  // a theme change, a slide's height
  window.Explainer.drawAll = function () {
    document.querySelectorAll("[data-figure]").forEach(window.Explainer.draw);
  };
  // a screen turned or resized across the phone's width: its figures' fonts change
  if (style.phoneQuery && style.phoneQuery.addEventListener) {
    style.phoneQuery.addEventListener("change", window.Explainer.drawAll);
  }

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
  function keep(target) {
    var sections = target.matches("section.section") ? [target]
        : Array.prototype.slice.call(target.querySelectorAll("section.section"));
    var inside = target.closest("section.section");
    if (inside && sections.indexOf(inside) < 0) sections.push(inside);
    var now = [];
    sections.forEach(function (section) {
      sectionPlots(section).forEach(function (el, i) {
        if (el._drawn !== undefined && target.contains(el)) {
          kept[plotKey(el, i)] = el;
          now.push(el);
        }
      });
    });
    // The kept figures leave the page before the swap: htmx walks every element it removes
    // (two cleanup events each), and a figure's SVG is most of a part's elements (963 of the
    // feed-forward token part's 1,446). adopt() puts each back in place of its new copy.
    now.forEach(function (el) { el.remove(); });
  }
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || !event.detail.shouldSwap) return;
    kept = {};
    keep(target);
  });
  // an answer's out-of-band parts (the places that follow a control: web/core/views.py follow)
  // are swapped after its htmx:beforeSwap, before its main part: their figures are kept too
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    if (event.detail.target && event.detail.shouldSwap) keep(event.detail.target);
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

  // A swap loads its new content piece by piece (each child of a part, each out-of-band part):
  // the figures of all the pieces are drawn together once the last has loaded (a microtask), so
  // the page is laid out once for all of them, not once per piece after the previous piece's
  // figures were drawn.
  var toDraw = [], drawQueued = false;
  function init(root) {
    // a part's content swapped in (innerHTML) loads child by child: the first child's load
    // adopts every kept figure of the section, so the figures adopted are drawn here
    var plots = adopt(root);
    if (root.matches && root.matches("[data-figure]") && root.isConnected) plots.push(root);
    root.querySelectorAll("[data-figure]").forEach(function (el) {
      if (plots.indexOf(el) < 0) plots.push(el);
    });
    plots.forEach(function (el) { if (toDraw.indexOf(el) < 0) toDraw.push(el); });
    if (drawQueued) return;
    drawQueued = true;
    Promise.resolve().then(function () {
      drawQueued = false;
      var todo = toDraw.filter(function (el) { return el.isConnected; });
      toDraw = [];
      drawSome(todo);
    });
  }
  // The figures to draw are measured all before any is drawn (a measure after a drawing makes
  // the browser lay the page out again); one drawn before and now far off the screen waits.
  function drawSome(plots) {
    var todo = plots.filter(function (el) {
      return !el.closest("details:not([open])") && el._drawn !== keyOf(el);
    });
    var h = window.innerHeight || 800;
    var seen = todo.map(function (el) {
      return { width: el.clientWidth, far: !!nearing && el._drawn !== undefined &&
               farOff(el.getBoundingClientRect(), h) };
    });
    todo.forEach(function (el, i) {
      if (seen[i].far) drawLater(el);
      else draw(el, false, seen[i].width);
    });
  }
  function farOff(r, h) { return r.bottom < -NEAR_PX || r.top > h + NEAR_PX; }

  document.addEventListener("toggle", function (event) {
    var d = event.target;
    if (d.open && d.matches && d.matches("details")) {
      drawSome(Array.prototype.slice.call(d.querySelectorAll("[data-figure]")));
    }
  }, true);

  if (typeof htmx !== "undefined") {
    htmx.onLoad(init);            // runs for the first page too, and after every swap
  } else {
    document.addEventListener("DOMContentLoaded", function () { init(document.body); });
  }
})();
