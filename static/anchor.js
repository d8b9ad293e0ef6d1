// The address names the section its state was last changed in. A control's answer puts the
// page's state in the address (the server's HX-Push-Url); the section the control belongs to is
// added as the fragment (#tiling), as is the section whose "Go deeper" disclosure was opened or
// closed. A reload or a shared link then opens at that section: it is scrolled to when the page
// starts and kept at the top of the window while the sections around it load and grow (they are
// placeholders until they come near), until the reader scrolls, types or clicks (not while the
// guided tour or presentation mode, which place the page themselves, is on: then it asks
// tour.js, window.Explainer.tour, to place its step again). A prompt change (the page's own
// request) has no fragment.
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
    // the guided tour and presentation mode place the page themselves (tour.js, present.js)
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
        var tour = window.Explainer.tour;
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
