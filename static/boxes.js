// Boxes that scroll in themselves (a wide table, a long prompt's chips), looked at in new
// content (htmx.onLoad, after figures.js has drawn it) and on a resize: once per swap, for all
// the content it loaded (a swap loads piece by piece: each piece's look at sizes, after the
// previous piece's writes, made the browser lay the page out again), every size read before
// anything is written. Talks to no other file.
(function () {
  "use strict";

  // A list that scrolls in its own box (.grows: a long prompt's chips) shows the token in
  // question, the one clicked or the one just chosen, in its middle. Only the box scrolls,
  // never the page. Returns the scroll that does it (a function that writes it), or null.
  function keepInView(box) {
    var item = box.querySelector('[aria-pressed="true"], .chip.new');
    if (!item || box.scrollHeight <= box.clientHeight) return null;
    var offset = item.getBoundingClientRect().top - box.getBoundingClientRect().top;
    var by = offset - (box.clientHeight - item.offsetHeight) / 2;
    return function () { box.scrollTop += by; };
  }

  // A table wider or taller than its box scrolls inside it. A keyboard user can scroll it only
  // if the box can take the focus, so such a box becomes a focusable region named after what it
  // holds (WCAG 2.1.1; axe's scrollable-region-focusable). Boxes that fit are left alone.
  var BOXES = ".scroll, .table-scroll, .att-scroll";
  function name(box) {
    var inner = box.querySelector("[aria-label], caption, h3, h4");
    var text = inner && (inner.getAttribute("aria-label") || inner.textContent.trim());
    return (text ? text.slice(0, 80) : "Table") + " (scrolls)";
  }
  // Returns the attributes that say so (a function that writes them), or null.
  function mark(box) {
    var scrolls = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
    if (scrolls && !box.hasAttribute("tabindex")) {
      return function () {
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "region");
        box.setAttribute("aria-label", name(box));
      };
    } else if (!scrolls && box.getAttribute("role") === "region") {
      return function () {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      };
    }
    return null;
  }

  function within(root, selector) {
    var found = root.matches && root.matches(selector) ? [root] : [];
    root.querySelectorAll(selector).forEach(function (el) { found.push(el); });
    return found;
  }
  var roots = [], queued = false;
  function look() {
    queued = false;
    var todo = roots.filter(function (r) { return r.isConnected; });
    roots = [];
    var chosen = [], boxes = [], writes = [];
    todo.forEach(function (root) {
      within(root, ".grows").forEach(function (b) { if (chosen.indexOf(b) < 0) chosen.push(b); });
      within(root, BOXES).forEach(function (b) { if (boxes.indexOf(b) < 0) boxes.push(b); });
    });
    chosen.forEach(function (b) { writes.push(keepInView(b)); });
    boxes.forEach(function (b) { writes.push(mark(b)); });
    writes.forEach(function (write) { if (write) write(); });
  }
  function lookSoon(root) {
    if (roots.indexOf(root) < 0) roots.push(root);
    if (queued) return;
    queued = true;
    Promise.resolve().then(look);        // after the swap's last piece, before anything else
  }
  if (typeof htmx !== "undefined") htmx.onLoad(lookSoon);
  else document.addEventListener("DOMContentLoaded", function () { lookSoon(document.body); });
  window.addEventListener("resize", function () {
    var writes = [];
    document.querySelectorAll(BOXES).forEach(function (b) { writes.push(mark(b)); });
    writes.forEach(function (write) { if (write) write(); });
  });
})();
