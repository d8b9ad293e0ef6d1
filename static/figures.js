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

  // Plotly.react on the element already on the page redraws only what changed; uirevision
  // keeps the reader's zoom and pan across updates. A figure whose JSON is the one already
  // drawn is left alone. force: redraw anyway (a theme change). A figure inside a closed
  // disclosure is drawn when the disclosure opens: nobody sees it before, and it has no width
  // to fit yet.
  function draw(el, force) {
    if (typeof Plotly === "undefined") return;
    if (el.closest("details:not([open])")) return;
    var json = el.getAttribute("data-figure");
    var present = presenting(el), small = !present && phone();
    var key = present ? json + "@present" + (el._slideHeight || "") : small ? json + "@phone" : json;
    if (!force && el._drawn === key) return;
    var fig;
    try { fig = JSON.parse(themedJSON(json)); } catch (e) { return; }
    var data = fig.data || [];
    if (present) data = bigFonts(data, "");
    if (small) data = phoneFonts(data, "");
    var layout = themed(fig.layout || {});
    if (present) layout = presentLayout(layout);
    if (small) layout = phoneLayout(layout);
    layout = wrapAxisTitles(wrapTitle(layout, el.clientWidth), el.clientWidth);
    if (present && el._slideHeight) layout = Object.assign({}, layout, { height: el._slideHeight });
    if (layout.uirevision === undefined) layout = Object.assign({}, layout, { uirevision: "keep" });
    var drawn = Plotly.react(el, data, layout, PLOT_CONFIG);
    if ((present || small) && drawn && drawn.then) drawn.then(function () { return thinTicks(el, layout); }).catch(function () {});
    el._drawn = key;
  }
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

  function init(root) {
    // a part's content swapped in (innerHTML) loads child by child: the first child's load
    // adopts every kept figure of the section, so the figures adopted are drawn here
    var plots = adopt(root);
    if (root.matches && root.matches("[data-figure]") && root.isConnected) plots.push(root);
    root.querySelectorAll("[data-figure]").forEach(function (el) {
      if (plots.indexOf(el) < 0) plots.push(el);
    });
    plots.forEach(function (el) { draw(el); });     // not forEach(draw): its index would force
  }

  document.addEventListener("toggle", function (event) {
    var d = event.target;
    if (d.open && d.matches && d.matches("details")) d.querySelectorAll("[data-figure]").forEach(function (el) { draw(el); });
  }, true);

  if (typeof htmx !== "undefined") {
    htmx.onLoad(init);            // runs for the first page too, and after every swap
  } else {
    document.addEventListener("DOMContentLoaded", function () { init(document.body); });
  }
})();
