// A page that says "try again in a moment" (the busy page) tries again by itself after the
// seconds in the body's data-retry-after, plus up to a second at random so that a class that
// was refused together does not come back together. A reload keeps the whole address, its
// #fragment included: a student's #class=<code> survives, and the page joins the class's view.
(function () {
  "use strict";
  var link = document.getElementById("try-again");
  if (link) link.href = window.location.href;
  var seconds = Number(document.body.getAttribute("data-retry-after"));
  if (seconds > 0) {
    window.setTimeout(function () { window.location.reload(); },
                      1000 * seconds + Math.floor(Math.random() * 1000));
  }
})();
