// The overview (templates/overview.html): every box opens its section; Play steps the loop
// until the end of the text or the limit and Stop halts it at once; the slim map of the path
// sticks to the top and marks the section being read. The steps themselves are htmx requests
// (the Next token button's hx-get); this file only presses it again, or aborts it.
(function () {
  "use strict";
  if (typeof htmx === "undefined") return;
  var STEP_PAUSE_MS = 350;          // between two steps of Play: time to see each token arrive
  var FOLLOW_MS = 10000;            // how long a door keeps its section in view as others load
  var reduced = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)");
  function calm() { return reduced && reduced.matches; }
  function $(id) { return document.getElementById(id); }

  // --- every box is a door ----------------------------------------------------------------
  // A click anywhere on a box (or Enter on its link) moves to the section it names at once (a
  // smooth scroll would pass every section between and load each). A section still a placeholder
  // loads as it nears the screen; sections loading above it move it, so the page follows it for
  // a few seconds, until the reader scrolls.
  var following = null;
  function go(id) {
    var el = $(id);
    if (!el) return;
    el.scrollIntoView({ behavior: "auto", block: "start" });
    if (!el.hasAttribute("tabindex")) el.setAttribute("tabindex", "-1");
    el.focus({ preventScroll: true });
    following = { id: id, until: Date.now() + FOLLOW_MS };
  }
  document.addEventListener("htmx:afterSettle", function () {
    if (!following || Date.now() > following.until) { following = null; return; }
    var el = $(following.id);
    if (el) el.scrollIntoView({ behavior: "auto", block: "start" });
  });
  document.addEventListener("click", function (event) {
    var t = event.target;
    if (!t.closest) return;
    var link = t.closest("a[data-door], #ov-map a[href^='#']");
    if (!link) {
      var box = t.closest(".ov-box, .ov-part");
      if (!box || t.closest("button, input, select, textarea, a, .ov-thumb")) return;
      link = box.querySelector("a[data-door]");
      if (!link) return;
    }
    if (event.button || event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault();
    go(link.getAttribute("data-door") || link.getAttribute("href").slice(1));
  });
  // A user who scrolls away stops the page from following a door.
  ["wheel", "touchmove", "keydown"].forEach(function (name) {
    window.addEventListener(name, function () { following = null; }, { passive: true });
  });

  // --- Next token, Play, Stop ---------------------------------------------------------------
  var playing = false, timer = null, stepping = false;

  function live() { return $("overview-live"); }
  function buttons() {
    var l = live(), next = $("ov-next"), play = $("ov-play"), stop = $("ov-stop");
    if (!l || !next) return;
    var done = l.getAttribute("data-finish");
    play.disabled = playing || !!done;
    stop.disabled = !playing;
    next.disabled = !!done;
    if (playing) $("ov-status").textContent = "Playing: " + l.getAttribute("data-steps") +
        " tokens generated so far.";
  }
  function step() {
    timer = null;
    var next = $("ov-next");
    if (!playing || !next || next.disabled) { halt(); return; }
    next.click();
  }
  function halt(message) {
    var wasPlaying = playing;
    playing = false;
    if (timer) { clearTimeout(timer); timer = null; }
    var next = $("ov-next");
    if (next) htmx.trigger(next, "htmx:abort");     // a step in flight is dropped, not shown
    buttons();
    if (wasPlaying && message && $("ov-status")) $("ov-status").textContent = message;
  }
  document.addEventListener("click", function (event) {
    var b = event.target.closest && event.target.closest("#ov-play, #ov-stop");
    if (!b) return;
    if (b.id === "ov-play") {
      playing = true;
      buttons();
      $("ov-stop").focus();
      step();
    } else {
      halt("Stopped after " + (live() ? live().getAttribute("data-steps") : "0") +
           " generated tokens.");
      var play = $("ov-play");
      if (play && !play.disabled) play.focus();
    }
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    stepping = !!(elt && elt.id === "ov-next");
  });
  htmx.onLoad(function (root) {
    if (!root || root.id !== "overview-live" && !(root.querySelector && root.querySelector("#overview-live"))) return;
    var l = live();
    if (stepping && l && !calm()) l.classList.add("ov-stepped");   // the token travels the path
    stepping = false;
    // the text's latest words in view, once the swap's figures are drawn (figures.js): the
    // page is laid out once for both
    var text = l && l.querySelector("#ov-text");
    if (text) Promise.resolve().then(function () { text.scrollTop = text.scrollHeight; });
    if (playing) {
      if (l && l.getAttribute("data-finish")) { playing = false; }
      else timer = setTimeout(step, calm() ? 0 : STEP_PAUSE_MS);
    }
    buttons();
  });
  // A refused or failed step ends Play.
  document.addEventListener("htmx:responseError", function (event) {
    if (event.detail.elt && event.detail.elt.id === "ov-next") halt("The step failed.");
  });
  document.addEventListener("htmx:sendError", function (event) {
    if (event.detail.elt && event.detail.elt.id === "ov-next") halt("The step failed.");
  });

  // A new prompt starts the overview from the prompt again: the generated tokens belonged to
  // the old one.
  document.addEventListener("htmx:configRequest", function (event) {
    var path = event.detail.path || "";
    if (path === "/" || path.indexOf("/?") === 0) {
      event.detail.formData.delete("ov_steps");
      if (playing) halt();
    }
  });

  // --- the slim map: where the reader is -------------------------------------------------
  var map = $("ov-map");
  if (!map || !("IntersectionObserver" in window)) return;
  var links = {};
  map.querySelectorAll("a[href^='#']").forEach(function (a) { links[a.getAttribute("href").slice(1)] = a; });
  var visible = {};
  function mark() {
    var best = null, bestTop = Infinity;
    Object.keys(visible).forEach(function (id) {
      var el = $(id);
      if (!el) return;
      var top = Math.abs(el.getBoundingClientRect().top);
      if (top < bestTop) { bestTop = top; best = id; }
    });
    // written only where it changes: a section moved by a swap below the band calls this with
    // the same answer, and a write of the same value is still a change of the page
    Object.keys(links).forEach(function (id) {
      var now = links[id].getAttribute("aria-current");
      if (id === best && now !== "location") links[id].setAttribute("aria-current", "location");
      else if (id !== best && now !== null) links[id].removeAttribute("aria-current");
    });
    var row = map.querySelector("ol");         // one row: the current stage scrolled into it
    if (best && links[best] && row.scrollWidth > row.clientWidth) {
      var left = links[best].parentNode.offsetLeft - row.offsetLeft - 40;
      if (Math.abs(row.scrollLeft - left) > 1) row.scrollLeft = left;
    }
  }
  // A section counts as being read while it crosses the band just below the map.
  var reading = new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      if (e.isIntersecting) visible[e.target.id] = true; else delete visible[e.target.id];
    });
    mark();
  }, { rootMargin: "-15% 0px -70% 0px" });
  var watched = new WeakSet();
  function watch() {
    Object.keys(links).forEach(function (id) {
      var el = $(id);
      if (el && !watched.has(el)) { watched.add(el); reading.observe(el); }
    });
  }
  htmx.onLoad(watch);
  watch();
  // The map shows it is stuck (a shadow) once the overview has scrolled away.
  var away = new IntersectionObserver(function (entries) {
    map.classList.toggle("stuck", !entries[entries.length - 1].isIntersecting);
  });
  var overview = null;
  function watchOverview() {
    var el = $("overview");
    if (el === overview || !el) return;
    if (overview) away.unobserve(overview);
    overview = el;
    away.observe(el);
  }
  htmx.onLoad(watchOverview);
  watchOverview();
})();

// ---- The page's one sampler ---------------------------------------------------------------
// Its controls are in the overview and in the Sampling section under the same names (s_temp,
// s_topk, s_topp: web/presentation/overview.py). Moving one moves the others at once, so the form holds one
// value; a request sends each name once (the server takes a value given twice alike as one).
(function () {
  "use strict";
  var NAMES = ["s_rep", "s_temp", "s_topk", "s_topp", "s_minp", "s_seed"];
  function shared(el) {
    return el && el.name && NAMES.indexOf(el.name) >= 0 && el.type !== "hidden";
  }
  function mirror(el) {
    document.querySelectorAll('#state [name="' + el.name + '"]').forEach(function (other) {
      if (other === el || other.type === "hidden" || other.value === el.value) return;
      other.value = el.value;
      if (other.id) {
        document.querySelectorAll('output[data-mirror="' + other.id + '"]').forEach(function (o) {
          o.textContent = el.value;
        });
      }
    });
  }
  document.addEventListener("input", function (event) { if (shared(event.target)) mirror(event.target); });
  document.addEventListener("change", function (event) { if (shared(event.target)) mirror(event.target); });
  document.addEventListener("htmx:configRequest", function (event) {
    var data = event.detail.formData, elt = event.detail.elt;
    if (!data) return;
    NAMES.forEach(function (name) {
      var all = data.getAll(name);
      if (all.length > 1) data.set(name, elt && elt.name === name ? elt.value : all[0]);
    });
  });
})();
