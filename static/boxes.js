// Boxes that scroll in themselves (a wide table, a long prompt's chips), looked at in new
// content (htmx.onLoad, after figures.js has drawn it) and on a resize. Talks to no other file.
(function () {
  "use strict";

  // A list that scrolls in its own box (.grows: a long prompt's chips) shows the token in
  // question, the one clicked or the one just chosen, in its middle. Only the box scrolls,
  // never the page.
  function keepInView(box) {
    var item = box.querySelector('[aria-pressed="true"], .chip.new');
    if (!item || box.scrollHeight <= box.clientHeight) return;
    var offset = item.getBoundingClientRect().top - box.getBoundingClientRect().top;
    box.scrollTop += offset - (box.clientHeight - item.offsetHeight) / 2;
  }
  function showChosen(root) {
    var boxes = root.matches && root.matches(".grows") ? [root] : [];
    root.querySelectorAll(".grows").forEach(function (el) { boxes.push(el); });
    boxes.forEach(keepInView);
  }
  if (typeof htmx !== "undefined") htmx.onLoad(showChosen);
  else document.addEventListener("DOMContentLoaded", function () { showChosen(document.body); });

  // A table wider or taller than its box scrolls inside it. A keyboard user can scroll it only
  // if the box can take the focus, so such a box becomes a focusable region named after what it
  // holds (WCAG 2.1.1; axe's scrollable-region-focusable). Boxes that fit are left alone.
  var BOXES = ".scroll, .table-scroll, .att-scroll";
  function name(box) {
    var inner = box.querySelector("[aria-label], caption, h3, h4");
    var text = inner && (inner.getAttribute("aria-label") || inner.textContent.trim());
    return (text ? text.slice(0, 80) : "Table") + " (scrolls)";
  }
  function mark(box) {
    var scrolls = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
    if (scrolls && !box.hasAttribute("tabindex")) {
      box.setAttribute("tabindex", "0");
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", name(box));
    } else if (!scrolls && box.getAttribute("role") === "region") {
      box.removeAttribute("tabindex");
      box.removeAttribute("role");
      box.removeAttribute("aria-label");
    }
  }
  function init(root) {
    var boxes = root.matches && root.matches(BOXES) ? [root] : [];
    root.querySelectorAll(BOXES).forEach(function (b) { boxes.push(b); });
    boxes.forEach(mark);
  }
  if (typeof htmx !== "undefined") htmx.onLoad(init);
  window.addEventListener("resize", function () { init(document.body); });
})();
