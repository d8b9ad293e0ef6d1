// The page's only script. htmx does the requests and swaps; this draws the Plotly figures
// found in new content (their JSON is in a data-figure attribute, built by the server) and
// mirrors range sliders into their <output> while they move.
(function () {
  "use strict";
  var PLOT_CONFIG = { responsive: true, displaylogo: false, displayModeBar: false };

  function dark() {
    var theme = document.documentElement.getAttribute("data-theme");
    return theme === "dark" || (theme !== "light" && window.matchMedia &&
                                window.matchMedia("(prefers-color-scheme: dark)").matches);
  }

  // The server builds figures for a white page; the dark theme recolours the frame only.
  function themed(layout) {
    if (!dark()) return layout;
    var ink = "#e8ecf4", paper = "#161b26", grid = "#39414f";
    var out = Object.assign({}, layout, { paper_bgcolor: paper, plot_bgcolor: paper,
      font: Object.assign({}, layout.font || {}, { color: ink }) });
    ["xaxis", "yaxis"].concat(Object.keys(layout)).forEach(function (k) {
      if (/^[xy]axis\d*$/.test(k)) out[k] = Object.assign({}, layout[k] || {}, { gridcolor: grid, zerolinecolor: grid });
    });
    return out;
  }

  function draw(el) {
    if (typeof Plotly === "undefined") return;
    var fig;
    try { fig = JSON.parse(el.getAttribute("data-figure")); } catch (e) { return; }
    Plotly.react(el, fig.data || [], themed(fig.layout || {}), PLOT_CONFIG);
  }
  window.explainerDraw = draw;    // learn.js redraws every figure when the theme changes

  // A control outside the swapped region (the prompt box) learns from its message whether
  // it is invalid: the server writes the message, this keeps aria-invalid in step with it.
  function markInvalid() {
    document.querySelectorAll("[aria-describedby^='error-']").forEach(function (control) {
      var message = document.getElementById(control.getAttribute("aria-describedby"));
      if (message && message.textContent.trim()) control.setAttribute("aria-invalid", "true");
      else control.removeAttribute("aria-invalid");
    });
  }

  function init(root) {
    markInvalid();
    var plots = root.matches && root.matches("[data-figure]") ? [root] : [];
    root.querySelectorAll("[data-figure]").forEach(function (el) { plots.push(el); });
    plots.forEach(draw);
  }

  document.addEventListener("input", function (event) {
    var el = event.target;
    if (!el.id) return;
    document.querySelectorAll('output[data-mirror="' + el.id + '"]').forEach(function (out) {
      out.value = el.value;
    });
  });

  // --- sampling -> greedy vs beam search (helper "sampling") ---
  // The samples beside the beams are drawn with the sampling section's settings. When that
  // section alone was re-rendered (one of its controls changed), tell the decoding section to
  // fetch itself again; a prompt change already re-renders both.
  document.addEventListener("htmx:afterSwap", function (event) {
    var info = event.detail && event.detail.pathInfo;
    if (event.target.id !== "sampling" || !info) return;
    if (String(info.requestPath).indexOf("/section/sampling") !== 0) return;
    var refresh = document.getElementById("decoding-refresh");
    if (refresh && typeof htmx !== "undefined") htmx.trigger(refresh, "sampling-changed");
  });
  // --- end of the sampling block ---

  if (typeof htmx !== "undefined") {
    htmx.onLoad(init);            // runs for the first page too, and after every swap
  } else {
    document.addEventListener("DOMContentLoaded", function () { init(document.body); });
  }
})();

// ---- generation loop: streaming ---------------------------------------------------------
// The Generate button of the generation-loop section reads /generate/stream (Server-Sent
// Events) with fetch, so a refusal (4xx/503) shows its message and Stop can abort the request;
// aborting closes the connection, and the server stops generating. Token text goes in with
// textContent only: it is model output, never markup.
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

// --- Hardening: a request the server could not answer is said so, in the page's status line.
// The server answers 503 with a plain-text message at once when it is overloaded (web/limits.py);
// htmx does not swap 5xx answers, so without this a busy server would look like nothing
// happened. The message is set as text, never as HTML.
(function () {
  "use strict";
  function say(text) {
    var line = document.getElementById("server-status");
    if (line) line.textContent = text;
  }
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var plain = (xhr.getResponseHeader("Content-Type") || "").indexOf("text/plain") === 0;
    say(plain && xhr.responseText ? xhr.responseText
        : "The server could not answer this request (HTTP " + xhr.status + "). Try again.");
  });
  document.addEventListener("htmx:sendError", function () {
    say("The server could not be reached. Check the connection, then try again.");
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var xhr = event.detail.xhr;
    if (xhr && xhr.status > 0 && xhr.status < 500) say("");
  });
})();
})();

// ---- attention: click a picture of a figure to choose it ---------------------------------
// A figure with data-click-controls="id1 id2" sets those controls (selects of the section) to
// the clicked trace's meta values [v1, v2] and fires "change" on the last one, so htmx asks for
// the section just as if they had been chosen in the selects (which stay the keyboard way).
(function () {
  "use strict";
  function wire(el) {
    if (el._clickControls || typeof el.on !== "function") return;
    el._clickControls = true;
    el.on("plotly_click", function (event) {
      var meta = event.points && event.points[0] && event.points[0].data.meta;
      var ids = el.getAttribute("data-click-controls").split(" ");
      if (!meta || meta.length !== ids.length) return;
      var controls = ids.map(function (id) { return document.getElementById(id); });
      if (controls.some(function (c) { return !c; })) return;
      controls.forEach(function (c, i) { c.value = String(meta[i]); });
      controls[controls.length - 1].dispatchEvent(new Event("change", { bubbles: true }));
    });
  }
  function init(root) {
    var els = root.matches && root.matches("[data-click-controls]") ? [root] : [];
    root.querySelectorAll("[data-click-controls]").forEach(function (el) { els.push(el); });
    els.forEach(wire);
  }
  if (typeof htmx !== "undefined") htmx.onLoad(init);    // after the figures are drawn
})();

// ---- scrollable boxes: reachable by keyboard -----------------------------------------------
// A table wider or taller than its box scrolls inside it. A keyboard user can scroll it only
// if the box can take the focus, so such a box becomes a focusable region named after what it
// holds (WCAG 2.1.1; axe's scrollable-region-focusable). Boxes that fit are left alone.
(function () {
  "use strict";
  var BOXES = ".scroll, .table-scroll, .att-scroll";
  function name(box) {
    var inner = box.querySelector("[aria-label], caption, h3, h4");
    var text = inner && (inner.getAttribute("aria-label") || inner.textContent.trim());
    return (text ? text.slice(0, 80) : "Table") + " (scrolls)";
  }
  function mark(box) {
    var scrolls = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
    if (scrolls && !box.hasAttribute("tabindex")) {
      box.setAttribute("tabindex", "0");
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", name(box));
    } else if (!scrolls && box.getAttribute("role") === "region") {
      box.removeAttribute("tabindex");
      box.removeAttribute("role");
      box.removeAttribute("aria-label");
    }
  }
  function init(root) {
    var boxes = root.matches && root.matches(BOXES) ? [root] : [];
    root.querySelectorAll(BOXES).forEach(function (b) { boxes.push(b); });
    boxes.forEach(mark);
  }
  if (typeof htmx !== "undefined") htmx.onLoad(init);
  window.addEventListener("resize", function () { init(document.body); });
})();
