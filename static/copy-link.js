// "Copy link": the address (which holds the page's whole state) goes to the clipboard, or, where
// the clipboard cannot be written (not a secure context), is shown to be copied by hand in
// #copy-status. Talks to no other file.
(function () {
  "use strict";
  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target.closest("button") : null;
    if (!t || t.id !== "copy-link") return;
    var status = document.getElementById("copy-status");
    var done = function () { status.textContent = "Link copied."; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(window.location.href).then(done, function () { status.textContent = window.location.href; });
    } else {
      status.textContent = window.location.href;
    }
  });
})();
