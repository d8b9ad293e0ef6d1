// The page's controls as the reader uses them: a range slider's value sent while it moves (its
// `slide` trigger, throttled) and mirrored in its <output>, Enter in a section's box sending
// that box alone, and aria-invalid kept in step with the server's message for a control.
// The requests themselves are htmx's (the templates' hx-* attributes); requests.js numbers them
// and drops stale answers. Talks to no other file.
(function () {
  "use strict";

  // A range's <output data-mirror="<its id>"> shows its value while it moves.
  document.addEventListener("input", function (event) {
    var el = event.target;
    if (!el.id) return;
    document.querySelectorAll('output[data-mirror="' + el.id + '"]').forEach(function (out) {
      out.value = el.value;
    });
  });

  // A control outside the swapped region (the prompt box) learns from its message whether
  // it is invalid: the server writes the message, this keeps aria-invalid in step with it.
  function markInvalid() {
    document.querySelectorAll("[aria-describedby^='error-']").forEach(function (control) {
      var message = document.getElementById(control.getAttribute("aria-describedby"));
      if (message && message.textContent.trim()) control.setAttribute("aria-invalid", "true");
      else control.removeAttribute("aria-invalid");
    });
  }

  // once per swap, not per piece of it that loads (a part's children, each message out of
  // band): the query walks the whole page
  var marking = false;
  function markInvalidSoon() {
    if (marking) return;
    marking = true;
    Promise.resolve().then(function () { marking = false; markInvalid(); });
  }
  if (typeof htmx !== "undefined") htmx.onLoad(markInvalidSoon);
  else document.addEventListener("DOMContentLoaded", markInvalidSoon);

  // Enter in a section's box sends that box alone. Every control sits inside the page's form,
  // so Enter would submit it and recompute every loaded section. In a section's own box, Enter
  // sends that control's change instead.
  document.addEventListener("keydown", function (event) {
    var el = event.target;
    if (event.key !== "Enter" || !el.matches || !el.matches("section.section input")) return;
    if (el.type === "submit" || el.type === "button") return;
    event.preventDefault();
    el.dispatchEvent(new Event("change", { bubbles: true }));
  });

  if (typeof htmx === "undefined") return;

  // A range slider (data-slide) fires `slide`, its htmx trigger: at once on a key step or the
  // first move, then at most every THROTTLE_MS while it is dragged, and on release with the final
  // value. A value already sent is not sent again. With hx-sync="this:queue last" at most one
  // request per slider is in flight and the last value always follows.
  var THROTTLE_MS = 100;
  var sliders = new WeakMap();
  function slider(el) {
    var s = sliders.get(el);
    if (!s) { s = { sent: el.getAttribute("value"), at: 0, timer: null }; sliders.set(el, s); }
    return s;
  }
  function fire(el) {
    var s = slider(el);
    if (s.timer) { clearTimeout(s.timer); s.timer = null; }
    if (String(el.value) === String(s.sent)) return;
    s.sent = el.value;
    s.at = Date.now();
    htmx.trigger(el, "slide");
  }
  document.addEventListener("input", function (event) {
    var el = event.target;
    if (!el.matches || !el.matches("input[data-slide]")) return;
    var s = slider(el), wait = s.at + THROTTLE_MS - Date.now();
    if (wait <= 0) fire(el);
    else if (!s.timer) s.timer = setTimeout(function () { s.timer = null; fire(el); }, wait);
  });
  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el.matches && el.matches("input[data-slide]")) fire(el);
  });
})();
