// The page's only script. htmx does the requests and swaps; this draws the Plotly figures
// found in new content (their JSON is in a data-figure attribute, built by the server) and
// mirrors range sliders into their <output> while they move.
(function () {
  "use strict";
  var PLOT_CONFIG = { responsive: true, displaylogo: false, displayModeBar: false };

  function draw(el) {
    if (typeof Plotly === "undefined") return;
    var fig;
    try { fig = JSON.parse(el.getAttribute("data-figure")); } catch (e) { return; }
    Plotly.react(el, fig.data || [], fig.layout || {}, PLOT_CONFIG);
  }

  // A control outside the swapped region (the prompt box) learns from its message whether
  // it is invalid: the server writes the message, this keeps aria-invalid in step with it.
  function markInvalid() {
    document.querySelectorAll("[aria-describedby^='error-']").forEach(function (control) {
      var message = document.getElementById(control.getAttribute("aria-describedby"));
      if (message && message.textContent.trim()) control.setAttribute("aria-invalid", "true");
      else control.removeAttribute("aria-invalid");
    });
  }

  function init(root) {
    markInvalid();
    var plots = root.matches && root.matches("[data-figure]") ? [root] : [];
    root.querySelectorAll("[data-figure]").forEach(function (el) { plots.push(el); });
    plots.forEach(draw);
  }

  document.addEventListener("input", function (event) {
    var el = event.target;
    if (!el.id) return;
    document.querySelectorAll('output[data-mirror="' + el.id + '"]').forEach(function (out) {
      out.value = el.value;
    });
  });

  if (typeof htmx !== "undefined") {
    htmx.onLoad(init);            // runs for the first page too, and after every swap
  } else {
    document.addEventListener("DOMContentLoaded", function () { init(document.body); });
  }
})();
