// Glossary terms (the `term` macro, templates/macros.html): the definition is already in the
// page; this shows it on keyboard focus, toggles it on a tap or click, hides it on Escape, and
// keeps it inside the window. Hover is CSS alone (static/style.css). Its Escape stops there:
// tour.js, loaded after it, must not also close the tour.
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
