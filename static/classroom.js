// The class in one room (web/classroom/): the teacher's panel on the projector, and on each
// student's page the teacher followed live, with the class polls.
//
// This tab's part in a class is kept in sessionStorage ("classroom": {code, role, following}):
// the teacher's tab after "Start a class session", a student's after the join link (which lands
// on /?<teacher's state>#class=<code>). Rights are checked by the server (the teacher's secret
// is an HttpOnly cookie this script cannot read).
//
// Transport: short polls of /class/<code>/state with the version as ETag (304 while nothing
// changed), every follow_poll_ms (500 ms). The teacher's tab sends its page state whenever its
// address changes (every control, slide and Next-token step is in the address).
// Everything the class or the server wrote is put on the page as text (textContent).
(function () {
  "use strict";

  var KEY = "classroom";
  var POLL_MS = 500, SYNC_MS = 250;
  var OWN = ["theme"];                         // the follower's own settings, never followed
  var PAGE_ONLY = ["tour", "present", "open"];  // moved in place, without loading the page

  var info = null, panel = null, etag = null, last = null, timer = null, lastSent = null,
      sending = false, expected = null, navigating = false, kinds = [], lastTour,
      placed = false,      // a follower's page was moved to the teacher's step since it loaded
      placedNow = 0;       // the step it was moved to by this answer of the server's (apply)

  function load() {
    try { return JSON.parse(window.sessionStorage.getItem(KEY) || "null"); } catch (e) { return null; }
  }
  function save() {
    try {
      if (info) window.sessionStorage.setItem(KEY, JSON.stringify(info));
      else window.sessionStorage.removeItem(KEY);
    } catch (e) { /* private mode: this page only */ }
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "className") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function post(path, body) {
    return fetch(path, { method: "POST", credentials: "same-origin", cache: "no-store",
                         headers: { "Content-Type": "application/json" },
                         body: JSON.stringify(body || {}) })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (j) {
          if (!r.ok) throw new Error(j.error || ("The server answered " + r.status + "."));
          return j;
        });
      });
  }

  // --- the page's state as a set of parameters --------------------------------------------------
  function params(search) {
    var out = {};
    new URLSearchParams(search).forEach(function (v, k) {
      if (OWN.indexOf(k) < 0 && !(k in out)) out[k] = v;
    });
    return out;
  }
  function sameExcept(a, b, skip) {
    var keys = Object.keys(a).concat(Object.keys(b));
    return keys.every(function (k) { return skip.indexOf(k) >= 0 || a[k] === b[k]; });
  }
  function key(p) { return JSON.stringify(Object.keys(p).sort().map(function (k) { return [k, p[k]]; })); }

  // --- the panel -------------------------------------------------------------------------------
  // A phone (the page's phone layout): a student's follows the slide without presentation mode.
  function phone() { return !!(window.matchMedia && window.matchMedia("(max-width: 700px)").matches); }

  // The teacher's panel serves the slide. Its views (data-view): "join", the join code and a big
  // QR code over the slide while people join; "chip", a small bar in the corner of the tour's bar
  // (code, joined, answered, and Reveal while a poll is open) that covers nothing of the slide;
  // "menu", the panel above the chip (polls, the join code again, the end). The join view folds
  // to the chip when the teacher moves to another slide or opens a poll. The reveal is a layer
  // over the slide, closable. A student's panel heads the page on a phone.
  function setView(v) {
    if (!panel || !info || info.role !== "teacher") return;
    info.view = v;
    save();
    panel.setAttribute("data-view", v);
    var chip = panel.querySelector(".class-chip-open");
    if (chip) chip.setAttribute("aria-expanded", v === "menu" ? "true" : "false");
    sizes();
  }
  // The tour's bar leaves the chip its room; a student's phone page scrolls below the panel.
  function sizes() {
    if (!panel) return;
    var root = document.documentElement.style;
    if (info && info.role === "teacher" && panel.getAttribute("data-view") === "chip") {
      root.setProperty("--class-chip-w", Math.ceil(panel.getBoundingClientRect().width) + "px");
    } else if (info && info.role !== "teacher") {
      root.setProperty("--class-h", Math.ceil(panel.getBoundingClientRect().height) + "px");
    }
  }

  function buildPanel() {
    if (panel) return panel;
    var teacher = info && info.role === "teacher";
    panel = el("aside", { id: "class-panel", className: "class-panel " + (teacher ? "teacher" : "member"),
                          "aria-label": "Class session" });
    document.body.classList.toggle("class-teaching", !!teacher);
    document.body.classList.toggle("class-member", !teacher);
    if (teacher) {
      var chip = el("div", { className: "class-chip" });
      var open = button("", function () {
        setView(panel.getAttribute("data-view") === "menu" ? "chip" : "menu");
      }, "class-chip-open");
      open.setAttribute("aria-expanded", "false");
      chip.appendChild(open);
      panel.appendChild(chip);
    }
    panel.appendChild(el("h2", { className: "class-title" }, "Class session"));
    panel.appendChild(el("div", { className: "class-head" }));
    panel.appendChild(el("p", { className: "class-status", role: "status", "aria-live": "polite" }));
    panel.appendChild(el("div", { className: "class-tools" }));
    panel.appendChild(el("div", { className: "class-poll" }));
    panel.appendChild(el("div", { className: "class-reveal", "aria-live": "polite" }));
    panel.appendChild(el("div", { className: "class-others" }));
    if (teacher) document.body.appendChild(panel);
    else document.body.insertBefore(panel, document.body.firstChild);
    return panel;
  }
  function part(name) { return buildPanel().querySelector(".class-" + name); }
  function status(text) { part("status").textContent = text; }

  function button(label, onClick, cls) {
    var b = el("button", { type: "button", className: cls || "" }, label);
    b.addEventListener("click", onClick);
    return b;
  }

  function teacherChip(s) {
    var open = panel.querySelector(".class-chip-open");
    if (!open) return;
    var joined = s.members + " joined";
    open.textContent = (info.shown || info.code) + " · " + joined;
    open.setAttribute("aria-label", "Class menu: code " + info.code + ", " + joined);
    sizes();
  }

  function teacherHead(s) {
    var head = part("head");
    if (head.getAttribute("data-code") === info.code) return;
    head.setAttribute("data-code", info.code);
    head.textContent = "";
    var join = el("p", { className: "class-join" });
    join.appendChild(document.createTextNode("Join at "));
    join.appendChild(el("strong", { className: "class-link" }, info.joinPage || (location.origin + "/class")));
    join.appendChild(document.createTextNode(" with the code "));
    join.appendChild(el("strong", { className: "class-code", "aria-label": "class code " + info.code }, info.shown || info.code));
    head.appendChild(join);
    head.appendChild(el("p", { className: "class-url" }, info.joinUrl || ""));
    head.appendChild(el("img", { className: "class-qr", src: "/class/" + info.code + "/qr.svg",
                                 alt: "QR code of the join link", width: "176", height: "176" }));
    var views = el("p", { className: "class-views" });
    views.appendChild(button("Fold the join code", function () { setView("chip"); }, "class-fold"));
    views.appendChild(button("Show the join code", function () { setView("join"); }, "class-show-join"));
    head.appendChild(views);
  }

  function teacherTools() {
    var tools = part("tools");
    if (tools.getAttribute("data-role") === "teacher") return;
    tools.setAttribute("data-role", "teacher");
    tools.textContent = "";
    var label = el("label", { "for": "class-kind" }, "Class poll");
    var select = el("select", { id: "class-kind" });
    kinds.forEach(function (k) { select.appendChild(el("option", { value: k.id }, k.label)); });
    tools.appendChild(label);
    tools.appendChild(select);
    tools.appendChild(button("Open the poll", function () {
      post("/class/" + info.code + "/polls", { kind: select.value, query: location.search })
        .then(function () { setView("chip"); refresh(); }, function (e) { status(e.message); });
    }));
    tools.appendChild(button("End the session", function () {
      post("/class/" + info.code + "/end", {}).then(function () { leave("The session has ended."); },
                                                     function (e) { status(e.message); });
    }, "class-end"));
  }

  function studentTools() {
    var tools = part("tools");
    var role = info.following ? "following" : "away";
    if (tools.getAttribute("data-role") === role) return;
    tools.setAttribute("data-role", role);
    tools.textContent = "";
    if (info.following) {
      tools.appendChild(button("Step away to explore", function () { setFollowing(false); }));
    } else {
      tools.appendChild(button("Follow the teacher", function () { setFollowing(true); }, "class-follow"));
    }
    tools.appendChild(button("Leave the class", function () { leave("You left the class."); }, "class-leave"));
  }

  function setFollowing(on) {
    info.following = on;
    save();
    studentTools();
    showStatus();
    if (on && last) apply(last.query);
  }

  function showStatus() {
    if (!last) return;
    var people = last.members + (last.members === 1 ? " person has" : " people have") + " joined";
    if (info.role === "teacher") status(people + ". Your screen is followed.");
    else status((info.following ? "Following the teacher" : "Exploring on your own: the teacher's screen is not followed") +
                " · class " + last.code + " · " + people);
  }

  // --- polls -----------------------------------------------------------------------------------
  function showPoll(p) {
    var box = part("poll");
    var sig = p ? [p.id, p.status, info.role].join("/") : "none";
    if (box.getAttribute("data-sig") !== sig) {
      box.setAttribute("data-sig", sig);
      box.textContent = "";
      part("reveal").textContent = "";
      part("reveal").classList.remove("closed");
      if (p) drawPoll(box, p);
    }
    if (!p) return;
    var count = box.querySelector(".class-count");
    if (count) count.textContent = p.answered + " of " + last.members + " answered";
    if (p.status === "revealed" && p.reveal && !part("reveal").firstChild) drawReveal(p.reveal);
    if (info.role !== "teacher" && p.status === "open" && p.mine !== undefined) {
      var mine = box.querySelector(".class-mine");
      if (mine && !mine.getAttribute("data-set")) {
        mine.textContent = p.mine === null ? "" : "Your answer: " + p.mine + ". You can change it until the reveal.";
      }
    }
  }

  function drawPoll(box, p) {
    box.appendChild(el("h3", { className: "class-q-title" }, "Class poll: " + p.label));
    box.appendChild(el("p", { className: "class-question" }, p.question));
    if (p.status !== "revealed") box.appendChild(el("p", { className: "class-count", "aria-live": "polite" }));
    if (info.role === "teacher") {
      if (p.status === "open") {
        box.appendChild(button("Reveal the answers", function () {
          post("/class/" + info.code + "/polls/" + p.id + "/reveal", {}).then(refresh, function (e) { status(e.message); });
        }, "class-reveal-btn"));
      }
      return;
    }
    if (p.status !== "open") {
      if (p.status !== "revealed") box.appendChild(el("p", {}, "The poll is closed."));
      return;
    }
    var form = el("form", { className: "class-answer", novalidate: "" });
    var id = "class-answer-" + p.id, input;
    if (p.input === "choice") {
      var set = el("fieldset", {});
      set.appendChild(el("legend", {}, "Your answer"));
      p.choices.forEach(function (c, i) {
        var l = el("label", { className: "class-choice" });
        var r = el("input", { type: "radio", name: id, value: c });
        if (p.mine === c) r.checked = true;
        l.appendChild(r);
        l.appendChild(document.createTextNode(" " + c));
        set.appendChild(l);
      });
      form.appendChild(set);
    } else {
      form.appendChild(el("label", { "for": id }, "Your answer"));
      // A number is typed as text: the server reads "77,3", "86 016" or "1,024" as people
      // write them (a browser's number box would drop a decimal comma without a word).
      input = el("input", p.input === "number"
        ? { id: id, type: "text", inputmode: p.whole ? "numeric" : "decimal", maxlength: "40",
            autocomplete: "off", "aria-describedby": id + "-hint" }
        : { id: id, type: "text", maxlength: "40", autocomplete: "off", autocapitalize: "off", spellcheck: "false" });
      if (p.mine) input.value = p.mine;
      form.appendChild(input);
      if (p.input === "number") {
        form.appendChild(el("p", { id: id + "-hint", className: "hint" }, p.whole
          ? "A whole number; thousands may be grouped: 86,016 or 86 016."
          : "A number: 77.3 or 77,3 (a decimal point or comma)."));
      }
    }
    form.appendChild(el("button", { type: "submit" }, "Send my answer"));
    var mine = el("p", { className: "class-mine", role: "status" });
    form.appendChild(mine);
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var value = input ? input.value : ((form.querySelector("input[type=radio]:checked") || {}).value || "");
      if (!String(value).trim()) { mine.textContent = "Type or choose an answer first."; return; }
      post("/class/" + info.code + "/polls/" + p.id + "/answer", { answer: value }).then(function (j) {
        mine.setAttribute("data-set", "1");
        mine.textContent = "Your answer: " + j.answer + ". You can change it until the reveal.";
      }, function (err) { mine.textContent = err.message; });
    });
    box.appendChild(form);
  }

  function pct(x) { return (100 * x).toFixed(x < 0.001 && x > 0 ? 3 : 1).replace(/\.0+$/, "") + "%"; }

  function drawReveal(r) {
    var box = part("reveal");
    box.textContent = "";
    box.classList.remove("closed");
    if (info.role === "teacher") {      // a layer over the slide: closed, the slide is back
      box.appendChild(button("Back to the slide", function () { box.classList.add("closed"); }, "class-reveal-close"));
      box.appendChild(el("h2", { className: "class-reveal-title" }, "The class and the model"));
    }
    var model = el("p", { className: "class-model" });
    model.appendChild(document.createTextNode("The model: "));
    model.appendChild(el("strong", {}, r.model));
    if (r.model_p !== undefined) model.appendChild(document.createTextNode(" (p = " + pct(r.model_p) + ")"));
    box.appendChild(model);
    var cls = r.total + (r.total === 1 ? " answer" : " answers") + " from the class" +
      (r.joined !== undefined && r.joined !== null ? " (" + r.total + " of " + r.joined + " who joined)" : "") +
      "; " + r.right + " right" + (r.right_means ? " (" + r.right_means + ")" : "");
    if (r.median !== undefined) cls += "; median " + r.median + "; within 10% of the model's: " + r.within_10;
    box.appendChild(el("p", { className: "class-summary" }, cls + "."));
    if (r.favourite) {
      box.appendChild(el("p", { className: "class-favourite" },
        "The class's favourite, “" + r.favourite.answer + "” (" + pct(r.favourite.share) + " of the class): " +
        (r.favourite.p === null ? "not one token of this model, so it cannot be its next token."
                                : "the model gave it " + pct(r.favourite.p) + ".")));
    }
    if (r.figure) {
      var fig = el("div", { className: "plot class-figure", role: "img",
                            "aria-label": "Bars: the class's share of each guess beside the model's probability of it" });
      fig.setAttribute("data-figure", JSON.stringify(r.figure));
      box.appendChild(fig);
      if (window.Explainer && window.Explainer.draw) window.Explainer.draw(fig);
    }
    var table = el("table", { className: "class-table", "aria-label": "The class's answers" });
    var head = el("tr");
    ["answer", "students", "share"].concat(r.figure ? ["model's p"] : []).forEach(function (h) {
      head.appendChild(el("th", { scope: "col" }, h));
    });
    table.appendChild(el("thead")).appendChild(head);
    var body = el("tbody");
    r.groups.forEach(function (g) {
      var tr = el("tr", g.right ? { className: "right" } : {});
      tr.appendChild(el("td", {}, g.answer + (g.right ? " ✓" : "")));
      tr.appendChild(el("td", {}, g.count));
      tr.appendChild(el("td", {}, pct(g.share)));
      if (r.figure) tr.appendChild(el("td", {}, g.p === null ? "not one token" : pct(g.p)));
      body.appendChild(tr);
    });
    table.appendChild(body);
    box.appendChild(table);
    if (r.others) box.appendChild(el("p", { className: "hint" }, "and " + r.others + " other answers"));
  }

  // --- what the server withholds ---------------------------------------------------------------
  // While a poll is open, the server leaves its answer out of every part of the page it sends a
  // member (web/classroom/withheld.py); the page it sent says which places it left out
  // (body[data-withheld]). A page loaded before the poll opened still shows them, and one
  // loaded during the poll lacks them after the reveal: it is loaded again, once per change.
  function withheldWanted(p) {
    if (!p || (p.status !== "open" && p.status !== "revealing")) return "";
    return (p.withholds || []).slice().sort().join(",");
  }
  function matchWithheld(p) {                       // true: the page is being loaded again
    if (info.role === "teacher" || navigating) return navigating;
    var have = document.body.getAttribute("data-withheld");
    if (have === null) return false;                 // not the explainer's page
    var want = withheldWanted(p);
    if (want === have) {
      if (info.reloadedFor) { info.reloadedFor = null; save(); }
      return false;
    }
    var sig = want + "@" + (p ? p.id : 0);
    if (info.reloadedFor === sig) return false;      // loaded again for this already
    info.reloadedFor = sig;
    save();
    navigating = true;
    // loaded again, the page shows the teacher's step (apply), not where the browser was scrolled
    if ("scrollRestoration" in window.history) window.history.scrollRestoration = "manual";
    window.location.reload();
    return true;
  }

  // --- following -------------------------------------------------------------------------------
  function apply(query) {
    if (navigating || info.role === "teacher") return;
    var want = params(query), have = params(location.search);
    if (!sameExcept(want, have, PAGE_ONLY)) {
      navigating = true;
      var theme = new URLSearchParams(location.search).get("theme");
      var q = new URLSearchParams(query);
      if (theme) q.set("theme", theme);
      var s = q.toString();
      location.replace("/" + (s ? "?" + s : ""));
      return;
    }
    var tour = window.Explainer && window.Explainer.tour;
    if (tour) {
      // a phone shows the slide's section in the phone layout, scrolled to
      var present = want.present === "1" && !phone(), changed = present !== tour.presenting();
      var fitted = changed ? tour.present(present) : null;
      var step = Number(want.tour || 0);
      // once after the page loads (a reload for a poll, or the reader's): the browser put it
      // back where it was scrolled, and the sections laid out for a phone moved under it
      if (step > 0 && (!placed || !tour.open() || tour.step() !== step || (changed && !present))) {
        placed = true;
        placedNow = step;
        tour.show(step);
        // the figures fitted to the phone change the page's heights: scrolled to it again
        if (fitted && !present) Promise.resolve(fitted).then(function () { tour.show(step); });
      }
      else if (step === 0 && tour.open()) tour.close();
    }
    expected = key(params(location.search));
  }

  function watchAddress() {
    if (!info || navigating) return;
    var now = params(location.search);
    if (info.role === "teacher") {
      var k = key(now);
      if (now.tour !== lastTour) {
        if (lastTour !== undefined && last && last.members > 0 && panel &&
            panel.getAttribute("data-view") === "join") setView("chip");
        lastTour = now.tour;
      }
      if (k !== lastSent && !sending) {
        sending = true;
        var sent = k;
        post("/class/" + info.code + "/state", { query: location.search }).then(function () {
          lastSent = sent; sending = false;
        }, function (e) { sending = false; status(e.message); });
      }
    } else if (info.following && expected !== null && key(now) !== expected) {
      setFollowing(false);         // the student moved something: they are exploring
    }
  }

  function refresh() {
    if (!info) return;
    window.clearTimeout(timer);
    var headers = etag ? { "If-None-Match": etag } : {};
    fetch("/class/" + info.code + "/state", { credentials: "same-origin", cache: "no-store", headers: headers })
      .then(function (r) {
        if (r.status === 304) return null;
        if (r.status === 404) { leave("This class has ended or expired."); return null; }
        if (!r.ok) {           // the server's reason (503: the class store is not answering)
          return r.json().catch(function () { return {}; }).then(function (j) {
            var e = new Error(j.error || "status " + r.status);
            e.fromServer = !!j.error;
            throw e;
          });
        }
        etag = r.headers.get("ETag");
        return r.json();
      })
      .then(function (s) {
        if (!s || !info) return;
        last = s;
        if (s.kinds) kinds = s.kinds;
        if (info.role === "teacher" && !s.teacher) info.role = "student";
        if (info.role === "teacher") { teacherHead(s); teacherTools(); teacherChip(s); }
        else {
          studentTools();
          if (!s.member) { location.replace("/class/" + info.code); return; }   // join again
          if (info.following) apply(s.query);
          if (matchWithheld(s.poll)) return;
        }
        showStatus();
        showPoll(s.poll);
        sizes();
        // on a phone the panel heads the page (the open poll in it) and the page scrolls under
        // it (style.css: scroll-padding-top is the panel's height, --class-h): the step was
        // scrolled to before the poll filled the panel, and its heading was left under the panel
        if (placedNow && window.Explainer.tour) window.Explainer.tour.show(placedNow);
        placedNow = 0;
      })
      .catch(function (e) {
        if (info) status(e && e.fromServer ? e.message : "Reconnecting to the class…");
      })
      .then(function () { if (info) timer = window.setTimeout(refresh, POLL_MS); });
  }

  function leave(message) {
    info = null;
    save();
    window.clearTimeout(timer);
    document.body.classList.remove("class-teaching", "class-member");
    if (!panel) return;
    panel.removeAttribute("data-view");
    part("head").textContent = "";
    part("tools").textContent = "";
    part("poll").textContent = "";
    part("reveal").textContent = "";
    status(message);
    part("tools").appendChild(button("Close", function () { panel.remove(); panel = null; }));
  }

  function begin() {
    buildPanel();
    if (info.role === "teacher") setView(info.view || "join");
    if (info.role !== "teacher") expected = key(params(location.search));
    refresh();
  }

  function teach(j) {
    info = { code: j.code, role: "teacher", shown: j.shown, joinUrl: j.join_url,
             joinPage: j.join_page, following: true, view: "join" };
    kinds = j.kinds || kinds;
    POLL_MS = j.follow_poll_ms || POLL_MS;
    lastSent = null;                                  // the projector's state is sent at once
    save();
    etag = null;
    if (panel) { panel.remove(); panel = null; }
    begin();
  }

  // The other live sessions this browser teaches (its cookie holds each one's secret): none is
  // stranded by starting another; each can be taken up again or ended from here.
  function showOthers(others) {
    var box = part("others");
    box.textContent = "";
    if (!others || !others.length) return;
    box.appendChild(el("p", { className: "hint" }, "Your other class sessions on this browser:"));
    var list = el("ul", { className: "class-others-list" });
    others.forEach(function (o) {
      var li = el("li");
      li.appendChild(el("span", {}, o.shown + " · " + o.members + (o.members === 1 ? " joined " : " joined ")));
      li.appendChild(button("Resume", function () {
        fetch("/class/mine", { credentials: "same-origin", cache: "no-store" })
          .then(function (r) { return r.json(); })
          .then(function (m) {
            var found = (m.sessions || []).filter(function (x) { return x.code === o.code; })[0];
            if (found) teach(found); else status("That session has ended.");
          });
      }));
      li.appendChild(button("End it", function () {
        post("/class/" + o.code + "/end", {}).then(function () {
          showOthers(others.filter(function (x) { return x.code !== o.code; }));
        }, function (e) { status(e.message); });
      }, "class-end"));
      list.appendChild(li);
    });
    box.appendChild(list);
  }

  function startSession() {
    post("/class/new", { query: location.search }).then(function (j) {
      teach(j);
      showOthers(j.others);
    }, function (e) {
      buildPanel();
      status("The session could not start: " + e.message);
    });
  }

  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target.closest("#class-start") : null;
    if (t) startSession();
  });

  function init() {
    var m = /^#class=([A-Z0-9]{4,12})$/.exec(location.hash);
    info = load();
    if (m) {
      var teacher = info && info.code === m[1] && info.role === "teacher";
      info = teacher ? info : { code: m[1], role: "student", following: true };
      save();
      window.history.replaceState(window.history.state, "", location.pathname + location.search);
    }
    window.setInterval(watchAddress, SYNC_MS);          // does nothing outside a class
    if (!info) return;
    if (info.role === "teacher") lastSent = null;       // send the state once on load
    begin();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
