// A table cut by its box says so in words. A table wider (or taller) than the box that scrolls
// it gets a line just above the box: which of its columns (rows) are wholly in view, of how
// many, and that the rest is a scroll away; a faint shadow at the edge was the only cue, and a
// cut on a row boundary looks complete. Updated on new content, resizes, disclosures and the
// box's own scrolling. A list of chips that scrolls in its own box (ol.grows: the chat's tokens)
// says the same of its rows of chips. New content is looked at in its own section only (a swap
// changes no box outside it), once per frame, every box measured before any note is written
// (a note written between two measures made the browser lay the page out again). Talks to no
// other file (boxes.js makes the same boxes focusable).
(function () {
  "use strict";
  var CUT_BOXES = ".table-scroll, .scroll, .att-scroll, ol.grows, ul.grows";
  function wholly(cells, lo, hi, start, end) {
    var seen = [];
    cells.forEach(function (c, i) {
      var r = c.getBoundingClientRect();
      if (r[start] >= lo - 1 && r[end] <= hi + 1) seen.push(i);
    });
    return seen;
  }
  function overflows(el) {
    return el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1 ||
           el.clientHeight > 0 && el.scrollHeight > el.clientHeight + 1;
  }
  // a list's items by line (the chips of a row share their top), each line one box
  function lines(list) {
    var rows = [];
    Array.prototype.forEach.call(list.children, function (li) {
      var r = li.getBoundingClientRect(), last = rows[rows.length - 1];
      if (!r.height) return;
      if (last && Math.abs(r.top - last.top) < 2) last.bottom = Math.max(last.bottom, r.bottom);
      else rows.push({ top: r.top, bottom: r.bottom });
    });
    return rows.map(function (b) { return { getBoundingClientRect: function () { return b; } }; });
  }
  // The note above the box says `text` (none: no note): a function that writes it.
  function say(box, note, text) {
    return function () {
      if (!text) { if (note) note.remove(); return; }
      if (!note) {
        note = document.createElement("p");
        note.className = "cut-note";
        box.insertAdjacentElement("beforebegin", note);
      }
      if (note.textContent !== text) note.textContent = text;
    };
  }
  // What the box's note should say, measured now and written by the function returned.
  function describeCut(box) {
    if (box.matches("ol, ul")) return describeList(box);
    var table = box.querySelector("table");
    var note = box.previousElementSibling;
    if (note && !note.classList.contains("cut-note")) note = null;
    // on a phone a table scrolls in its own box (style.css: table { display: block }): the
    // wrapper then fits and the table is what is cut
    var scroller = table && !overflows(box) && overflows(table) ? table : box;
    var wide = table && scroller.clientWidth > 0 && scroller.scrollWidth > scroller.clientWidth + 1;
    var tall = table && scroller.clientHeight > 0 && scroller.scrollHeight > scroller.clientHeight + 1;
    if (!wide && !tall) return say(box, note, "");
    var at = scroller.getBoundingClientRect(), parts = [];
    if (wide && table.rows.length) {
      var heads = Array.prototype.slice.call(table.rows[0].cells);
      var cols = wholly(heads, at.left, at.right, "left", "right");
      if (cols.length) parts.push("columns " + (cols[0] + 1) + "–" + (cols[cols.length - 1] + 1) +
                                  " of " + heads.length + " in view — scroll sideways for the rest");
    }
    if (tall && table.tBodies.length) {
      var rows = Array.prototype.slice.call(table.tBodies[0].rows);
      var seen = wholly(rows, at.top, at.bottom, "top", "bottom");
      if (seen.length) parts.push("rows " + (seen[0] + 1) + "–" + (seen[seen.length - 1] + 1) +
                                  " of " + rows.length + " in view — scroll down for the rest");
    }
    return say(box, note, parts.length ? "Cut to fit: " + parts.join("; ") + "." : "");
  }
  function describeList(box) {
    var note = box.previousElementSibling;
    if (note && !note.classList.contains("cut-note")) note = null;
    var tall = box.clientHeight > 0 && box.scrollHeight > box.clientHeight + 1;
    var rows = tall ? lines(box) : [], at = box.getBoundingClientRect();
    var seen = wholly(rows, at.top, at.bottom, "top", "bottom");
    if (!seen.length) return say(box, note, "");
    // the rows out of view are below, above, or both
    var first = seen[0] + 1, last = seen[seen.length - 1] + 1;
    var way = last === rows.length ? "up" : first === 1 ? "down" : "up or down";
    return say(box, note, "Cut to fit: rows " + first + "–" + last + " of " + rows.length +
               " in view — scroll " + way + " for the rest.");
  }
  // The boxes of the section holding `el` described at the next frame, with every other section
  // asked for until then. Outside a section: new content's own boxes (`own`), else the page's.
  var scopes = [], cutsQueued = false;
  function describeCuts(el, own) {
    var section = el && el.closest ? el.closest("section.section") : null;
    var within = section || (own && el && el.querySelectorAll ? el : document);
    if (scopes.indexOf(within) < 0) scopes.push(within);
    if (cutsQueued) return;
    cutsQueued = true;
    window.requestAnimationFrame(function () {
      cutsQueued = false;
      var boxes = [];
      scopes.forEach(function (s) {
        if (s !== document && !s.isConnected) return;
        if (s.matches && s.matches(CUT_BOXES)) boxes.push(s);
        s.querySelectorAll(CUT_BOXES).forEach(function (b) { if (boxes.indexOf(b) < 0) boxes.push(b); });
      });
      scopes = [];
      boxes.map(describeCut).forEach(function (write) { write(); });
    });
  }
  window.addEventListener("resize", function () { describeCuts(); });
  document.addEventListener("toggle", function (e) { describeCuts(e.target); }, true);
  document.addEventListener("scroll", function (e) {
    var box = e.target.closest ? e.target.closest(CUT_BOXES) : null;   // the box or its table
    if (box) describeCut(box)();
  }, true);
  if (typeof htmx !== "undefined") htmx.onLoad(function (root) { describeCuts(root, true); });
  else document.addEventListener("DOMContentLoaded", function () { describeCuts(); });
})();
