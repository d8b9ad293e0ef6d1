// The page's scripts share one namespace, window.Explainer, made here: this file is loaded
// first (templates/page.html lists the scripts in their order). Each file adds its own names to
// it (figures.js: draw, drawAll; lazy.js: loadAll, lazyFailed; stream.js: stream; tour.js:
// tour; present.js: present; predict.js: predict; ...), and reads another's only when an event
// comes, after every file has run. The two helpers here are used by several files.
(function () {
  "use strict";
  var E = window.Explainer = window.Explainer || {};

  // Page-level state lives in hidden inputs of the #state form, so it travels with every htmx
  // request, and in the address bar (history.replaceState), so a reload resumes it. A value
  // equal to its fallback leaves the address. (tour.js, present.js, theme.js, deeper.js)
  E.setParam = function (name, value, fallback) {
    var input = document.querySelector('#state input[type=hidden][name="' + name + '"]');
    if (input) input.value = value;
    var url = new URL(window.location.href);
    if (String(value) === String(fallback)) url.searchParams.delete(name);
    else url.searchParams.set(name, value);
    window.history.replaceState(window.history.state, "", url.toString());
  };

  // Presentation mode is on (present.js sets the body's class).
  E.presenting = function () { return document.body.classList.contains("present"); };
})();
