// The chat section's answer, streamed: its Answer button reads /chat/stream with stream.js
// (window.Explainer.stream), on the question, system message and limit in their boxes now.
// Each answer token is a chip (its text as pieces, its id); a click shows that step: the
// context it read and its five most probable tokens. The done event's line (the server's
// words, web/serving/chat_stream.py, shown by stream.js) says which token stopped it. Token text goes in with textContent only: it is model output, never markup.
(function () {
  "use strict";
  var E = window.Explainer, ms = E.ms;

  function chipOf(pieces, id, special) {
    var li = document.createElement("li");
    li.className = "chip c" + Math.floor(((id * 2654435761) % 4294967296) * 6 / 4294967296) +
                   (special ? " special" : "");
    var tok = document.createElement("span");
    tok.className = "tok";
    pieces.forEach(function (p) {
      if (p[0] === "text") { tok.appendChild(document.createTextNode(p[1])); return; }
      var m = document.createElement("span");
      m.className = "mark " + p[0];
      m.textContent = p[1];
      tok.appendChild(m);
    });
    var tid = document.createElement("span");
    tid.className = "tid";
    tid.textContent = String(id);
    li.appendChild(tok);
    li.appendChild(tid);
    return li;
  }

  function showStep(panel, d) {
    panel.textContent = "";
    var h = document.createElement("p");
    h.className = "chat-step-h";
    h.textContent = "Step " + d.i + " (" + (d.phase === "prefill" ?
        "prefill: the whole chat read at once" : "decode: one new token read") + "), " +
        d.n_context + " tokens of context, model pass " + ms(d.ms) + ". Chosen: id " + d.id +
        ", p = " + d.prob.toFixed(4) + ". The five most probable next tokens:";
    panel.appendChild(h);
    var ol = document.createElement("ol");
    ol.className = "chat-top";
    d.top.forEach(function (t) {
      var li = document.createElement("li");
      var chips = document.createElement("ol");
      chips.className = "chips small";
      chips.appendChild(chipOf(t.pieces, t.id, false));
      li.appendChild(chips);
      li.appendChild(document.createTextNode(" p = " + t.prob.toFixed(4) +
                                             (t.id === d.id ? "  (chosen)" : "")));
      ol.appendChild(li);
    });
    panel.appendChild(ol);
    panel.hidden = false;
  }

  function startChat(button) {
    var box = button.closest("section");
    var out = box.querySelector(".chat-out");
    var list = box.querySelector(".chat-tokens");
    var panel = box.querySelector(".chat-step");
    out.textContent = "";
    list.textContent = "";
    panel.hidden = true;
    panel.textContent = "";
    // the question, system message and limit as they are in their boxes now (the button is
    // outside the part that typing redraws)
    var url = new URL(button.getAttribute("data-stream-url"), window.location.href);
    ["chat_q", "chat_sys", "chat_max"].forEach(function (name) {
      var field = box.querySelector('[name="' + name + '"]');
      if (field) url.searchParams.set(name, field.value);
    });
    E.stream({
      url: url.toString(),
      button: button, stop: box.querySelector(".chat-stop"),
      status: box.querySelector(".chat-status"), out: out,
      startText: "Prefill: reading the whole chat…",
      stoppedText: " by you (Stop). The server stopped generating too.",
      onToken: function (d) {
        out.appendChild(document.createTextNode(d.text));
        var li = chipOf(d.pieces, d.id, d.special);
        li.tabIndex = 0;
        li.setAttribute("role", "button");
        li.setAttribute("aria-label", "Step " + d.i + ": token " + d.id);
        li.addEventListener("click", function () { showStep(panel, d); });
        li.addEventListener("keydown", function (e) {
          if (e.key === "Enter" || e.key === " ") { e.preventDefault(); showStep(panel, d); }
        });
        list.appendChild(li);
      }
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".chat-start");
    if (button) startChat(button);
  });
})();
