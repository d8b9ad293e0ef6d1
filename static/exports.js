// Figure exports: under every figure a PNG button (Plotly's own image of the figure as drawn)
// and a CSV button (the figure's own data, from its data-figure JSON: one row per point, one
// per cell of a heatmap). Added to new content (htmx.onLoad, before predict.js and tour.js
// look at it). Talks to no other file.
(function () {
  "use strict";
  var TYPED = { f8: Float64Array, f4: Float32Array, i1: Int8Array, u1: Uint8Array,
                i2: Int16Array, u2: Uint16Array, i4: Int32Array, u4: Uint32Array };

  // plotly.py writes NumPy arrays as {dtype, bdata (base64), shape}; lists stay lists.
  function decode(v) {
    if (!v || typeof v !== "object" || Array.isArray(v) || !v.bdata) return v;
    var bin = window.atob(v.bdata), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var flat = Array.prototype.slice.call(new TYPED[v.dtype](bytes.buffer));
    var dims = v.shape ? String(v.shape).split(",").map(Number) : [flat.length];
    if (dims.length !== 2) return flat;
    var rows = [];
    for (var r = 0; r < dims[0]; r++) rows.push(flat.slice(r * dims[1], (r + 1) * dims[1]));
    return rows;
  }

  function cell(v) {
    if (v === null || v === undefined) return "";
    var s = String(v);
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  // One row per point: trace, name, x, y, z, text. A heatmap gives one row per cell.
  function figureCsv(fig) {
    var lines = ["trace,name,x,y,z,text"];
    (fig.data || []).forEach(function (t, n) {
      var x = decode(t.x), y = decode(t.y), z = decode(t.z), text = decode(t.text);
      var name = t.name || t.type || "";
      if (Array.isArray(z) && Array.isArray(z[0])) {
        z.forEach(function (row, i) {
          row.forEach(function (value, j) {
            lines.push([n, name, x ? x[j] : j, y ? y[i] : i, value, ""].map(cell).join(","));
          });
        });
        return;
      }
      var len = Math.max((x || []).length || 0, (y || []).length || 0, (Array.isArray(z) ? z.length : 0));
      for (var k = 0; k < len; k++) {
        lines.push([n, name, x ? x[k] : "", y ? y[k] : "", Array.isArray(z) ? z[k] : "",
                    Array.isArray(text) ? text[k] : (text || "")].map(cell).join(","));
      }
    });
    return lines.join("\n") + "\n";
  }

  function plotName(el, i) {
    var section = el.closest(".section");
    return (section ? section.id : "figure") + "-" + (i + 1);
  }

  function download(filename, text) {
    var url = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
    var a = document.createElement("a");
    a.href = url;
    a.download = filename;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }

  function addExportTools(root) {
    // new content without a figure (most pieces of a swap: a message out of band, a table) is
    // left at once: the page's figures are looked up for a figure's number in the page
    if (!(root.matches && root.matches(".plot[data-figure]")) && !root.querySelector(".plot[data-figure]")) return;
    var plots = Array.prototype.slice.call(document.querySelectorAll(".plot[data-figure]"));
    plots.forEach(function (el, i) {
      if (!root.contains(el) && root !== el) return;
      // The figure and its buttons share one box, so that in a grid of figures the buttons sit
      // under their figure instead of taking a cell of their own.
      var box = el.parentElement;
      if (!box.classList.contains("plot-box")) {
        box = document.createElement("div");
        box.className = "plot-box";
        el.insertAdjacentElement("beforebegin", box);
        box.appendChild(el);
      }
      var next = el.nextElementSibling;
      if (next && next.classList.contains("plot-tools")) next.remove();
      var what = el.getAttribute("aria-label") || "this figure";
      var tools = document.createElement("div");
      tools.className = "plot-tools";
      var png = document.createElement("button");
      png.type = "button";
      png.textContent = "PNG";
      png.setAttribute("aria-label", "Download as PNG: " + what);
      png.addEventListener("click", function () {
        if (window.Plotly) window.Plotly.downloadImage(el, { format: "png", filename: plotName(el, i) });
      });
      var csv = document.createElement("button");
      csv.type = "button";
      csv.textContent = "CSV";
      csv.setAttribute("aria-label", "Download the data as CSV: " + what);
      csv.addEventListener("click", function () {
        var fig;
        try { fig = JSON.parse(el.getAttribute("data-figure")); } catch (e) { return; }
        download(plotName(el, i) + ".csv", figureCsv(fig));
      });
      tools.appendChild(png);
      tools.appendChild(csv);
      el.insertAdjacentElement("afterend", tools);
    });
  }

  if (typeof htmx !== "undefined") htmx.onLoad(addExportTools);
  else document.addEventListener("DOMContentLoaded", function () { addExportTools(document.body); });
})();
