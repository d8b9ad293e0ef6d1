// The one reader of the page's token streams (Server-Sent Events): generation.js reads
// /generate/stream with it, chat.js /chat/stream. One stream runs at a time on the page: a new
// one aborts the one running. It reads with fetch, so a refusal (4xx/503) shows the server's
// message and Stop can abort the request; aborting closes the connection, and the server stops
// generating. It counts the tokens in the status line and ends with the done event's message,
// written by the server (web/serving/streaming.py); the section's own file shows each token.
// Everything goes in as text (textContent), never as markup.
// Shared on window.Explainer: stream(options), ms(x).
(function () {
  "use strict";
  var E = window.Explainer;
  var running = null;            // {controller} of the stream in progress

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

  E.ms = function (x) { return x === null ? "–" : x.toFixed(2) + " ms"; };

  function tokens(n) { return n + (n === 1 ? " token" : " tokens"); }

  // o: url; button (disabled while it runs), stop (its Stop button), status (the status line),
  // out (the element the tokens go in: once it has left the page, the section was redrawn and
  // the stream is aborted); startText (the status until the first token); onToken(data), for
  // each token event; stoppedText (after "Stopped after <n> tokens") when the stream is aborted
  // before its end.
  E.stream = function (o) {
    if (running) running.controller.abort();
    var controller = new AbortController();
    var me = { controller: controller };
    running = me;
    o.status.textContent = o.startText;
    o.button.disabled = true;
    o.stop.disabled = false;
    var count = 0, finished = false;

    function end(message) {
      finished = true;
      o.status.textContent = message;
      o.button.disabled = false;
      o.stop.disabled = true;
      if (running === me) running = null;
    }

    function onEvent(name, d) {
      if (name === "token") {
        count += 1;
        o.onToken(d);
        o.status.textContent = tokens(count) + " so far";
      } else if (name === "done") {
        end(d.message);          // the server's words: why the loop stopped, and the times
      }
    }

    fetch(o.url, {
      signal: controller.signal, headers: { "Accept": "text/event-stream" }
    }).then(function (response) {
      if (!response.ok) {
        // a refusal says why: the stream's own checks as JSON {"errors": {name: message}}, a
        // busy server (web/serving/server.py) as plain text
        var type = response.headers.get("Content-Type") || "";
        return response.text().then(function (text) {
          var message = "";
          if (type.indexOf("application/json") === 0) {
            var errors = JSON.parse(text).errors || {};
            message = Object.keys(errors).map(function (k) { return errors[k]; }).join(" ");
          } else if (type.indexOf("text/plain") === 0) {
            message = text.trim();
          }
          end(message || "The server refused (" + response.status + ").");
        });
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder("utf-8");
      var buffer = "";
      function pump() {
        return reader.read().then(function (chunk) {
          if (!document.body.contains(o.out)) { controller.abort(); return; }  // section redrawn
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
        if (!finished) end("Stopped after " + tokens(count) + o.stoppedText);
      } else if (!finished) {
        end("The stream failed: " + err.message);
      }
    });
    o.stop.onclick = function () { controller.abort(); };
  };

  window.addEventListener("pagehide", function () { if (running) running.controller.abort(); });
})();
