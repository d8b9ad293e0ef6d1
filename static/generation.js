// The generation loop's answer, streamed: the section's Generate button reads /generate/stream
// with stream.js (window.Explainer.stream). Each token is added to the text (.stream-out) and
// listed with its measured model pass; the done event's line (the server's words, shown by
// stream.js) says why the loop stopped.
// Token text goes in with textContent only: it is model output, never markup.
(function () {
  "use strict";
  var E = window.Explainer;

  function start(button) {
    var section = button.closest("section");
    var out = section.querySelector(".stream-out");
    var list = section.querySelector(".stream-tokens");
    out.textContent = "";
    list.textContent = "";
    E.stream({
      url: button.getAttribute("data-stream-url"),
      button: button, stop: section.querySelector(".gen-stop"),
      status: section.querySelector(".stream-status"), out: out,
      startText: "Prefill: reading the prompt…",
      stoppedText: ". The server stopped generating too.",
      onToken: function (d) {
        var span = document.createElement("span");
        span.className = "streamed";
        span.textContent = d.text;
        out.appendChild(span);
        var li = document.createElement("li");
        var text = document.createElement("q");
        text.className = "pair";
        text.textContent = d.eos ? "end of text" : d.text;
        li.appendChild(text);
        li.appendChild(document.createTextNode(" " + E.ms(d.ms) +
            (d.phase === "prefill" ? " (prefill of the prompt + first token)" : "")));
        list.appendChild(li);
      }
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".gen-start");
    if (button) start(button);
  });
})();
