// "Go deeper" disclosures (details.deeper): which are open is page state, kept in the #state
// form's `open` input and in the address (window.Explainer.setParam), so a reload or a shared
// link opens the same ones. A figure inside one is fitted to its width when it opens
// (figures.js has drawn it then).
(function () {
  "use strict";
  var setParam = window.Explainer.setParam;
  // The list is kept as a set of ids, not read back from the page: a section not loaded yet
  // keeps the open state the URL gave it.
  document.addEventListener("toggle", function (event) {
    var d = event.target;
    if (!d.matches || !d.matches("details.deeper")) return;
    var input = document.querySelector('#state input[type=hidden][name="open"]');
    var ids = (input && input.value ? input.value.split(",") : []).filter(Boolean);
    var id = d.getAttribute("data-deeper"), at = ids.indexOf(id);
    // a disclosure a swap put in the page open (or shut) fires toggle too: nothing changed
    if (d.open === at >= 0) return;
    if (d.open && at < 0) ids.push(id);
    if (!d.open && at >= 0) ids.splice(at, 1);
    setParam("open", ids.join(","), "");
    // a figure drawn while its disclosure was closed had no width to fit: fit it now
    if (d.open && typeof Plotly !== "undefined") {
      d.querySelectorAll(".js-plotly-plot").forEach(function (el) { Plotly.Plots.resize(el); });
    }
  }, true);
})();
