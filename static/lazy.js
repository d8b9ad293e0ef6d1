// Sections computed when they near the screen. A section below the fold is a placeholder
// (data-lazy, templates/lazy_section.html) until it comes near; then its `near` trigger makes
// htmx fetch it. A placeholder whose load failed says so in place, with a Try again button.
// Shared on window.Explainer: loadAll() (printing; the browser tests), lazyFailed(el, message,
// retryAfter) (errors.js calls it), nearScreen(el) (requests.js: the sections a new prompt
// recomputes at once).
(function () {
  "use strict";
  if (typeof htmx === "undefined") return;
  var E = window.Explainer;

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
  E.loadAll = function () {
    var pending = document.querySelectorAll("[data-lazy]");
    pending.forEach(load);
    return pending.length;
  };
  window.addEventListener("beforeprint", E.loadAll);

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
  E.lazyFailed = failed;     // the page's one error handler (errors.js) calls it
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".lazy-retry");
    if (!button) return;
    var el = button.closest("[data-lazy]");
    button.parentNode.hidden = true;
    load(el);
  });

  // A section near the screen: within NEAR_PX of it.
  E.nearScreen = function (el) {
    var r = el.getBoundingClientRect(), h = window.innerHeight || 800;
    return r.bottom > -NEAR_PX && r.top < h + NEAR_PX;
  };
})();
