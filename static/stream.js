// The page's two token streams, one at a time: the generation loop's Generate button reads
// /generate/stream, the chat section's Answer reads /chat/stream (Server-Sent Events, with fetch,
// so a refusal (4xx/503) shows its message and Stop can abort the request; aborting closes the
// connection, and the server stops generating). Token text goes in with textContent only: it
// is model output, never markup. Talks to no other file.
(function () {
  "use strict";
  var running = null;            // {controller, box} of the stream in progress

  function parseEvents(buffer, onEvent) {   // -> the unfinished tail of buffer
    var parts = buffer.split("\n\n");
    var tail = parts.pop();
    parts.forEach(function (block) {
      var name = "message", data = [];
      block.split("\n").forEach(function (line) {
        if (line.indexOf("event: ") === 0) name = line.slice(7);
        else if (line.indexOf("data: ") === 0) data.push(line.slice(6));
      });
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    });
    return tail;
  }

  function ms(x) { return x === null ? "–" : x.toFixed(2) + " ms"; }

  function start(button) {
    var section = button.closest("section");
    var out = section.querySelector(".stream-out");
    var status = section.querySelector(".stream-status");
    var list = section.querySelector(".stream-tokens");
    var stop = section.querySelector(".gen-stop");
    if (running) running.controller.abort();
    var controller = new AbortController();
    var me = { controller: controller };
    running = me;
    out.textContent = "";
    list.textContent = "";
    status.textContent = "Prefill: reading the prompt…";
    button.disabled = true;
    stop.disabled = false;
    var count = 0;
    var finished = false;

    function end(message) {
      finished = true;
      status.textContent = message;
      button.disabled = false;
      stop.disabled = true;
      if (running === me) running = null;
    }

    function onEvent(name, d) {
      if (name === "token") {
        count += 1;
        var span = document.createElement("span");
        span.className = "streamed";
        span.textContent = d.text;
        out.appendChild(span);
        var li = document.createElement("li");
        var text = document.createElement("q");
        text.className = "pair";
        text.textContent = d.eos ? "end of text" : d.text;
        li.appendChild(text);
        li.appendChild(document.createTextNode(" " + ms(d.ms) +
            (d.phase === "prefill" ? " (prefill of the prompt + first token)" : "")));
        list.appendChild(li);
        status.textContent = count + (count === 1 ? " token" : " tokens") + " so far";
      } else if (name === "done") {
        var why = { eos: "the model chose its end-of-text token",
                    limit: "the new-token limit was reached",
                    context: "the context window is full" }[d.reason] || d.reason;
        end("Done: " + d.n_tokens + " tokens; stopped because " + why + ". Prefill " +
            ms(d.prefill_ms) + ", then " + ms(d.decode_ms) + " per token (median)" +
            (d.tokens_per_s ? ", " + d.tokens_per_s + " tokens/s of model time." : "."));
      }
    }

    fetch(button.getAttribute("data-stream-url"), {
      signal: controller.signal, headers: { "Accept": "text/event-stream" }
    }).then(function (response) {
      if (!response.ok) {
        return response.json().then(function (body) {
          var errors = body.errors || {};
          end(Object.keys(errors).map(function (k) { return errors[k]; }).join(" ") ||
              "The server refused (" + response.status + ").");
        });
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder("utf-8");
      var buffer = "";
      function pump() {
        return reader.read().then(function (chunk) {
          if (!document.body.contains(out)) { controller.abort(); return; }  // section redrawn
          if (chunk.done) {
            if (!finished) end("The connection ended after " + count + " tokens.");
            return;
          }
          buffer = parseEvents(buffer + decoder.decode(chunk.value, { stream: true }), onEvent);
          return pump();
        });
      }
      return pump();
    }).catch(function (err) {
      if (err.name === "AbortError") {
        if (!finished) end("Stopped after " + count + (count === 1 ? " token" : " tokens") +
                           ". The server stopped generating too.");
      } else if (!finished) {
        end("The stream failed: " + err.message);
      }
    });
    stop.onclick = function () { controller.abort(); };
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".gen-start");
    if (button) start(button);
  });
  window.addEventListener("pagehide", function () { if (running) running.controller.abort(); });

  // ---- the chat section: the same stream, on the chat template's ids (/chat/stream) ----------
  // Each answer token is a chip (its text as pieces, its id); a click shows that step: the
  // context it read and its five most probable tokens. The stop says which token stopped it.
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
    var status = box.querySelector(".chat-status");
    var panel = box.querySelector(".chat-step");
    var stop = box.querySelector(".chat-stop");
    var eosText = button.getAttribute("data-eos-text");
    var eosId = button.getAttribute("data-eos-id");
    if (running) running.controller.abort();
    var controller = new AbortController();
    var me = { controller: controller };
    running = me;
    out.textContent = "";
    list.textContent = "";
    panel.hidden = true;
    panel.textContent = "";
    status.textContent = "Prefill: reading the whole chat…";
    button.disabled = true;
    stop.disabled = false;
    var count = 0, finished = false, last = null;

    function end(message) {
      finished = true;
      status.textContent = message;
      button.disabled = false;
      stop.disabled = true;
      if (running === me) running = null;
    }

    function onEvent(name, d) {
      if (name === "token") {
        count += 1;
        last = d;
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
        status.textContent = count + (count === 1 ? " token" : " tokens") + " so far";
      } else if (name === "done") {
        var why;
        if (d.reason === "eos") {
          why = "Stopped by " + (eosText || "its end-of-sequence token") + " (id " + eosId +
                "): the model chose its end-of-turn token, the end-of-sequence token its file " +
                "names, which the template writes after every turn" +
                (last ? " (p = " + last.prob.toFixed(4) + ")." : ".");
        } else if (d.reason === "limit") {
          why = "Stopped by the new-token limit (" + d.n_tokens + " tokens): the model had not " +
                "yet chosen " + (eosText || "its end-of-turn token") + ".";
        } else if (d.reason === "context") {
          why = "Stopped: the context window is full.";
        } else {
          why = "Stopped: " + d.reason + ".";
        }
        end(why + " " + d.n_tokens + " tokens; prefill " + ms(d.prefill_ms) + ", then " +
            ms(d.decode_ms) + " per token (median).");
      }
    }

    // the question, system message and limit as they are in their boxes now (the button is
    // outside the part that typing redraws)
    var url = new URL(button.getAttribute("data-stream-url"), window.location.href);
    ["chat_q", "chat_sys", "chat_max"].forEach(function (name) {
      var field = box.querySelector('[name="' + name + '"]');
      if (field) url.searchParams.set(name, field.value);
    });
    fetch(url.toString(), {
      signal: controller.signal, headers: { "Accept": "text/event-stream" }
    }).then(function (response) {
      if (!response.ok) {
        return response.json().then(function (body) {
          var errors = body.errors || {};
          end(Object.keys(errors).map(function (k) { return errors[k]; }).join(" ") ||
              "The server refused (" + response.status + ").");
        });
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder("utf-8");
      var buffer = "";
      function pump() {
        return reader.read().then(function (chunk) {
          if (!document.body.contains(out)) { controller.abort(); return; }  // section redrawn
          if (chunk.done) {
            if (!finished) end("The connection ended after " + count + " tokens.");
            return;
          }
          buffer = parseEvents(buffer + decoder.decode(chunk.value, { stream: true }), onEvent);
          return pump();
        });
      }
      return pump();
    }).catch(function (err) {
      if (err.name === "AbortError") {
        if (!finished) end("Stopped after " + count + (count === 1 ? " token" : " tokens") +
                           " by you (Stop). The server stopped generating too.");
      } else if (!finished) {
        end("The stream failed: " + err.message);
      }
    });
    stop.onclick = function () { controller.abort(); };
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".chat-start");
    if (button) startChat(button);
  });

})();
