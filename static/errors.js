// The page's one error handler: a request the server could not answer is said so. The server
// answers 503 with a plain-text message at once when it is overloaded (web/core/limits.py); htmx
// does not swap 5xx answers, so without this a busy server would look like nothing happened.
// The page's status line (#server-status) says it; a section's placeholder that failed to load
// says it in place and tries again when a busy server says when (Retry-After): lazy.js does
// that, through window.Explainer.lazyFailed. Messages are set as text, never as HTML.
// (overview.js ends Play on a failed step: its own concern.)
(function () {
  "use strict";
  function say(text) {
    var line = document.getElementById("server-status");
    if (line) line.textContent = text;
  }
  function lazy(elt, message, retryAfter) {
    if (window.Explainer.lazyFailed) window.Explainer.lazyFailed(elt, message, retryAfter);
  }
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var plain = (xhr.getResponseHeader("Content-Type") || "").indexOf("text/plain") === 0;
    var text = plain && xhr.responseText ? xhr.responseText : "";
    say(text || "The server could not answer this request (HTTP " + xhr.status + "). Try again.");
    lazy(event.detail.elt, text || "This section could not be computed (HTTP " + xhr.status + ").",
         xhr.status === 503 ? Number(xhr.getResponseHeader("Retry-After")) || 2 : 0);
  });
  document.addEventListener("htmx:sendError", function (event) {
    say("The server could not be reached. Check the connection, then try again.");
    lazy(event.detail.elt, "The server could not be reached.");
  });
  document.addEventListener("htmx:timeout", function (event) {
    say("The server took too long to answer. Try again.");
    lazy(event.detail.elt, "The server took too long to answer.");
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var xhr = event.detail.xhr;
    if (xhr && xhr.status > 0 && xhr.status < 500) say("");
  });
})();
