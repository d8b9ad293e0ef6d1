// The guided tour: one step at a time (#tour's list, templates/page.html), the step's section
// marked .current and scrolled to, the step kept in the address (?tour=<n>, so a reload resumes
// it). Keys: the arrows and Page Up/Down move, Escape closes (glossary.js, loaded before, keeps
// an Escape that closes a definition). In presentation mode each step is a slide: present.js
// fits it (window.Explainer.present) whenever the current step changes.
// Shared on window.Explainer.tour: show(n, scroll), close(), open(), step(), markCurrent(), and
// present(on), presenting() (present.js's); classroom.js moves a follower's page with these,
// anchor.js places the step again once the page has loaded.
(function () {
  "use strict";
  var E = window.Explainer;
  var setParam = E.setParam, presenting = E.presenting;
  function $(id) { return document.getElementById(id); }

  function steps() { return Array.prototype.slice.call(document.querySelectorAll("#tour .tour-step")); }
  function tourOpen() { var t = $("tour"); return t && !t.hidden; }
  function currentStep() { return Number(($("tour-bar") || {}).value || 1); }

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
    E.present.fit();
    return target;
  }

  var shownStep = null;
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
    if (n !== shownStep) E.present.setMore(false, true);   // a new slide starts without More
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
    if (presenting()) E.present.set(false);
    markCurrent();
  }

  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
    if ((e.key === "ArrowRight" || e.key === "PageDown") && tourOpen()) { showStep(currentStep() + 1); e.preventDefault(); }
    else if ((e.key === "ArrowLeft" || e.key === "PageUp") && tourOpen()) { showStep(currentStep() - 1); e.preventDefault(); }
    else if (e.key === "Escape" && tourOpen()) { closeTour(); e.preventDefault(); }
  });

  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target.closest("button") : null;
    if (!t) return;
    if (t.id === "tour-start") showStep(tourOpen() ? currentStep() : 1);
    else if (t.id === "tour-next") showStep(currentStep() + 1);
    else if (t.id === "tour-prev") showStep(currentStep() - 1);
    else if (t.id === "tour-close") closeTour();
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (tourOpen()) showStep(currentStep(), !presenting());
  });
  E.tour = { show: showStep, close: closeTour, open: tourOpen, step: currentStep,
             markCurrent: markCurrent, presenting: presenting,
             present: function (on) { return E.present.set(on); } };
  // once per swap, not per piece of it that loads (a part's children, each message out of band):
  // the sections and the page's figures are looked at whole (present.js fit)
  var marking = false;
  function markSoon() {
    if (marking) return;
    marking = true;
    Promise.resolve().then(function () { marking = false; markCurrent(); });
  }
  if (typeof htmx !== "undefined") htmx.onLoad(markSoon);
  else document.addEventListener("DOMContentLoaded", function () { markCurrent(); });
})();
