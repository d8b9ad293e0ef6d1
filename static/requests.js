// The order of the page's answers. Every htmx request is numbered as it is sent (X-Request-No);
// a new prompt also names the loaded sections near the screen (X-Sections: lazy.js's
// window.Explainer.nearScreen), which the server recomputes at once; the others go back to
// placeholders and are computed again when they are reached. An answer older than the newest
// request for its target, or than the newest prompt, is not swapped in.
(function () {
  "use strict";
  if (typeof htmx === "undefined") return;
  var near = window.Explainer.nearScreen;

  // Every request is numbered as it is sent. An answer is dropped when a newer request was sent
  // for the same target, or a newer prompt for the whole page, so a slow answer never overwrites
  // a newer one (two controls that update the same part, a control answered after a new prompt).
  var sentNo = 0, latestFor = {}, latestPrompt = 0;
  function isPrompt(path) { return path === "/" || path.indexOf("/?") === 0; }
  document.addEventListener("htmx:configRequest", function (event) {
    var cfg = event.detail;
    sentNo += 1;
    if (isPrompt(cfg.path)) {
      latestPrompt = sentNo;
      var ids = [];
      document.querySelectorAll("#sections > section.section").forEach(function (s) {
        if (!s.hasAttribute("data-lazy") && near(s)) ids.push(s.id);
      });
      cfg.headers["X-Sections"] = ids.join(",");
    }
    var target = cfg.target && cfg.target.id;
    if (target) latestFor[target] = sentNo;
    cfg.headers["X-Request-No"] = String(sentNo);
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var cfg = event.detail.requestConfig || {};
    var no = Number((cfg.headers || {})["X-Request-No"] || 0);
    var target = event.detail.target && event.detail.target.id;
    if (!no) return;
    if ((target && no < (latestFor[target] || 0)) || (!isPrompt(cfg.path || "") && no < latestPrompt)) {
      event.detail.shouldSwap = false;
    }
  }, true);
})();
