// Presentation mode (key P, the Presentation mode button; ?present=1 in the address): each step
// of the guided tour (tour.js) is a slide made for a projector. The slide's section shows its
// idea at projector sizes and one picture drawn to the height the screen leaves (figures.js
// draws it: window.Explainer.draw, at el._slideHeight, with figure-style.js's projector fonts);
// M shows the rest of the section ("More"), R reveals the slide's predictions (predict.js).
// Leaving it hides again every answer shown during it (predict.js) and fits every figure to
// its box again.
// Shared on window.Explainer.present: set(on) (a promise: resolves once the figures fit),
// fit() (tour.js, on every step), setMore(on, quiet).
(function () {
  "use strict";
  var E = window.Explainer;
  var setParam = E.setParam, presenting = E.presenting;
  function $(id) { return document.getElementById(id); }
  function draw(el) { E.draw(el); }

  function setPresent(on) {
    document.body.classList.toggle("present", on);
    if (!on) setMore(false, true);
    $("present-toggle").setAttribute("aria-pressed", on ? "true" : "false");
    setParam("present", on ? 1 : 0, 0);
    // a new presentation starts with every answer hidden again
    if (!on) E.predict.forgetPresentation();
    E.predict.restore(document.body);
    if (on && !E.tour.open()) E.tour.show(1);
    else E.tour.markCurrent();
    E.drawAll();
    fitSlide();
    // out of it, every figure drawn while its section was hidden (Plotly's 700 px) fits its box
    // again: a phone's page would be wider than the phone. Resolves once they are.
    return on ? Promise.resolve() : Promise.all(resizePlots(document.body)).catch(function () {});
  }

  // A slide is its section's idea, at projector sizes (static/style.css: body.present): the
  // heading, the lead's sentences, the prediction's question and one picture (the first figure
  // of the core, or the section's own: SLIDE_PICTURE); the rest of the core is hidden
  // (.slide-off), one key away (M, "More": body.present-more shows it all, and the page
  // scrolls). Nothing is scaled down: the picture's figure is drawn to the height left on the
  // screen (figures.js draws it at el._slideHeight, with the presentation's font sizes).
  var SLIDE_PICTURE = { attention: ".att-row", chat: ".chat-text, .chat-none" };
  var PICTURES = ".plot[data-figure], ol.chips, .blk-diagram, .sp-rounds, table";
  var MIN_FIG = 220;                           // px: a figure is not drawn lower than this
  var more = false;
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
          draw(el);
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
    if (!el.isConnected || moreShown()) return done();
    var now = el.getBoundingClientRect().height;
    var want = Math.max(MIN_FIG, Math.floor(now - excess() - 2));
    want = Math.min(want, Math.floor(window.innerHeight * 0.85));
    if (el._slideHeight && Math.abs(want - now) <= 4) return done();
    el._slideHeight = want;
    draw(el);
    window.requestAnimationFrame(function () {
      if (presenting() && el.isConnected && excess() > 2 && want > MIN_FIG) {
        el._slideHeight = Math.max(MIN_FIG, want - excess() - 2);
        draw(el);
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
    E.predict.revealAll(slide);
    fitSlide();
  }

  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
    if (e.key === "p" || e.key === "P") { setPresent(!presenting()); e.preventDefault(); }
    else if ((e.key === "r" || e.key === "R") && presenting()) { revealSlide(); e.preventDefault(); }
    else if ((e.key === "m" || e.key === "M") && presenting()) { setMore(!more); e.preventDefault(); }
  });

  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target.closest("button") : null;
    if (!t) return;
    if (t.id === "present-toggle") setPresent(!presenting());
    else if (t.id === "tour-more") setMore(!more);
  });

  E.present = { set: setPresent, fit: fitSlide, setMore: setMore };
})();
