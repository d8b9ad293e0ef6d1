// The order of the page's answers. Every htmx request is numbered as it is sent (X-Request-No);
// a new prompt also names the loaded sections near the screen (X-Sections: lazy.js's
// window.Explainer.nearScreen), which the server recomputes at once; the others go back to
// placeholders and are computed again when they are reached. An answer older than the newest
// request for its target, or than the newest prompt, is not swapped in. Any other request names
// the places on the page that follow a change (X-Follows), so that a control's answer brings
// theirs out of band; such a part too is dropped when a newer request was sent for its place.
// The places far from the screen are named apart (X-Follows-Later): the answer computes nothing
// for them, names those that its change leaves out of date (X-Stale), and each one is marked so
// (data-stale) and asks for itself when it nears the screen.
(function () {
  "use strict";
  if (typeof htmx === "undefined") return;
  var near = window.Explainer.nearScreen;

  // Every request is numbered as it is sent. An answer is dropped when a newer request was sent
  // for the same target, or a newer prompt for the whole page, so a slow answer never overwrites
  // a newer one (two controls that update the same part, a control answered after a new prompt).
  var sentNo = 0, latestFor = {}, latestPrompt = 0;
  function isPrompt(path) { return path === "/" || path.indexOf("/?") === 0; }
  document.addEventListener("htmx:configRequest", function (event) {
    var cfg = event.detail;
    sentNo += 1;
    if (isPrompt(cfg.path)) {
      latestPrompt = sentNo;
      var ids = [];
      document.querySelectorAll("#sections > section.section").forEach(function (s) {
        if (!s.hasAttribute("data-lazy") && near(s)) ids.push(s.id);
      });
      cfg.headers["X-Sections"] = ids.join(",");
    } else {
      var places = follows();
      cfg.headers["X-Follows"] = places.near.join(",");
      cfg.headers["X-Follows-Later"] = places.later.join(",");
    }
    var target = cfg.target && cfg.target.id;
    if (target) latestFor[target] = sentNo;
    cfg.headers["X-Request-No"] = String(sentNo);
    if (!isPrompt(cfg.path)) covered(cfg, sentNo);
  });
  // The places that follow another's change (an element listening for "<section>-changed" or
  // "sampler-moved": decoding's samples, the overview's live part, ...), by the part each
  // updates: a control's answer brings those of them that read what it changed, out of band
  // (web/core/views.py follow), so one request and one swap update them all. Only those near
  // the screen (FOLLOW_NEAR_PX): the others, out of sight, are brought up to date when they near
  // it (stale below), so a control does not wait for work nobody sees (the samples of a 135 M
  // model are a few decode steps).
  var FOLLOWERS = '[hx-trigger*="-changed from:body"],[hx-trigger*="sampler-moved from:body"]';
  var FOLLOW_NEAR_PX = 300;
  function nearFollower(el) {
    if (!el.getClientRects().length) return false;          // not laid out: a closed disclosure
    var r = el.getBoundingClientRect(), h = window.innerHeight || 800;
    return r.bottom > -FOLLOW_NEAR_PX && r.top < h + FOLLOW_NEAR_PX;
  }
  function refresherOf(id) {
    return Array.prototype.slice.call(document.querySelectorAll(FOLLOWERS)).filter(function (el) {
      return el.getAttribute("hx-target") === "#" + id;
    })[0];
  }
  function follows() {
    var near = [], later = [];
    document.querySelectorAll(FOLLOWERS).forEach(function (el) {
      var id = (el.getAttribute("hx-target") || "").replace(/^#/, "");
      if (!id || near.indexOf(id) >= 0 || later.indexOf(id) >= 0) return;
      var place = document.getElementById(id);
      (place && !nearFollower(place) ? later : near).push(id);
    });
    return { near: near, later: later };
  }

  // --- out-of-date places -----------------------------------------------------------------------
  // An answer's X-Stale names the far places its change left out of date: each is marked
  // (data-stale: dimmed, aria-busy) from that answer's number on, and asks for itself (its
  // follower element's own request) once it is within FOLLOW_NEAR_PX of the screen. A swap of
  // that number or newer into the place (or around it) brings it up to date; an older one
  // (an answer sent before the change) leaves it marked. A place asks SETTLE_MS after it came
  // near, unless a control's request whose answer brings it (its target is the place or holds
  // it) is sent meanwhile: on a big model the server answers one request at a time, and a
  // control moved as soon as it was scrolled to waited for its own place's refresh.
  var SETTLE_MS = 150;
  var staleSince = {};
  var nearing = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      var el = e.target;
      if (e.isIntersecting && !el._nearTimer) {
        el._nearTimer = setTimeout(function () { el._nearTimer = undefined; refresh(el); },
                                   SETTLE_MS);
      }
    });
  }, { rootMargin: FOLLOW_NEAR_PX + "px 0px" }) : null;
  function wait(el) {                 // no refresh coming: it asks again when near
    clearTimeout(el._nearTimer);
    el._nearTimer = undefined;
  }
  // a control's request about to be sent: the stale places its answer brings wait for it
  function covered(cfg, no) {
    var target = cfg.target;
    if (!target || (cfg.elt && cfg.elt.matches && cfg.elt.matches(FOLLOWERS))) return;
    Object.keys(staleSince).forEach(function (id) {
      var el = document.getElementById(id);
      if (!el || !(target === el || target.contains(el))) return;
      wait(el);
      nearing && nearing.unobserve(el);
      el._coveredBy = no;
    });
  }
  // ... and if that answer did not bring it (dropped, refused), it asks for itself again
  document.addEventListener("htmx:afterRequest", function (event) {
    var cfg = event.detail.requestConfig || {};
    var no = Number((cfg.headers || {})["X-Request-No"] || 0);
    Object.keys(staleSince).forEach(function (id) {
      var el = document.getElementById(id);
      if (el && el._coveredBy === no) { el._coveredBy = undefined; mark(id); }
    });
  });
  function mark(id) {
    var el = document.getElementById(id);
    if (!el || !staleSince[id]) return;
    el.setAttribute("data-stale", "");
    el.setAttribute("aria-busy", "true");
    if (!nearing) { refresh(el); return; }
    nearing.unobserve(el);            // observed again: told at once whether it is near now
    nearing.observe(el);
  }
  function refresh(el) {
    var id = el.id;
    if (!el.isConnected || !staleSince[id] || el._refreshingFrom === staleSince[id]) return;
    var source = refresherOf(id);
    if (!source) return;              // its follower is gone (the part was drawn without it)
    nearing && nearing.unobserve(el);
    el._refreshingFrom = staleSince[id];
    // its follower element's own request (its values, hx-sync and swap), as its event would
    var asked = htmx.ajax("GET", source.getAttribute("hx-get"), { source: source, target: "#" + id });
    if (asked && asked.catch) asked.catch(function () {});    // a failure is said by errors.js
  }
  // a refresh refused (busy), failed or dropped: still out of date, it asks again a little
  // later, when near the screen (not at once, which would press a busy server)
  var RETRY_MS = 2000;
  document.addEventListener("htmx:afterRequest", function (event) {
    var el = event.detail.target;
    if (event.detail.successful || !el || !el.id || !staleSince[el.id] ||
        el._refreshingFrom !== staleSince[el.id]) return;
    el._refreshingFrom = undefined;
    setTimeout(function () { mark(el.id); }, RETRY_MS);
  });
  function unmark(id) {
    delete staleSince[id];
    var el = document.getElementById(id);
    if (!el) return;
    el.removeAttribute("data-stale");
    el.removeAttribute("aria-busy");
    el._refreshingFrom = el._coveredBy = undefined;
    wait(el);
    nearing && nearing.unobserve(el);
  }
  document.addEventListener("htmx:afterRequest", function (event) {
    var xhr = event.detail.xhr;
    var header = xhr && event.detail.successful && xhr.getResponseHeader("X-Stale");
    if (!header) return;
    var cfg = event.detail.requestConfig || {};
    var no = Number((cfg.headers || {})["X-Request-No"] || 0);
    header.split(",").forEach(function (id) {
      id = id.trim();
      if (!id || (staleSince[id] || 0) >= no) return;
      staleSince[id] = no;
      // an answer for it sent before this change is out of date too: not swapped in
      latestFor[id] = Math.max(latestFor[id] || 0, no);
      mark(id);
    });
  });
  // After each swap: a place swapped by an answer as new as its change, or inside what such an
  // answer replaced, is up to date; one replaced by an older answer is marked again.
  function settled(no, target) {
    Object.keys(staleSince).forEach(function (id) {
      var el = document.getElementById(id);
      if (!el) return;
      if (no >= staleSince[id] && target && (target === el || target.contains(el))) unmark(id);
      else if (!el.hasAttribute("data-stale")) mark(id);
    });
  }
  // (each event is dispatched on an element the swap put in place: the target of an innerHTML
  // swap, the new element of an outerHTML one)
  document.addEventListener("htmx:afterSwap", function (event) {
    var cfg = event.detail.requestConfig || {};
    settled(Number((cfg.headers || {})["X-Request-No"] || 0), event.target);
  });
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    settled(swappingNo, event.target);
  });

  var swappingNo = 0;             // the number of the answer being swapped, for its oob parts
  document.addEventListener("htmx:beforeSwap", function (event) {
    var cfg = event.detail.requestConfig || {};
    var no = Number((cfg.headers || {})["X-Request-No"] || 0);
    var target = event.detail.target && event.detail.target.id;
    swappingNo = no;
    if (!no) return;
    if ((target && no < (latestFor[target] || 0)) || (!isPrompt(cfg.path || "") && no < latestPrompt)) {
      event.detail.shouldSwap = false;
    }
  }, true);
  // An out-of-band part of an answer is dropped when a newer request was sent for its place or
  // a place around it; swapped, it counts as that answer's for its place (an older answer for it
  // that arrives later is dropped).
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var d = event.detail;
    if (!swappingNo || !d.target) return;
    for (var el = d.target; el; el = el.parentElement) {
      if (el.id && (latestFor[el.id] || 0) > swappingNo) { d.shouldSwap = false; return; }
    }
    if (d.target.id) latestFor[d.target.id] = Math.max(latestFor[d.target.id] || 0, swappingNo);
  }, true);

  // What an answer replaces leaves the page before htmx walks it. htmx cleans up every element
  // a swap removes: two events each (htmx:beforeCleanupElement, htmx:before-cleanup-element)
  // and the element's own htmx state. A sampler control's answers replaced about 1,000 elements,
  // 2,000 events. Only an element htmx set up (hx-get, hx-trigger, ...: listeners, timers) needs
  // it: every subtree of the replaced content without one is removed at once, unless it holds
  // the focus (htmx gives it to the new element of the same id) or the target of one of the
  // answer's out-of-band parts (swapped before the main one). Listening after figures.js (loaded
  // before this file), which has taken out the figures it keeps by then.
  var SET_UP = ["get", "post", "put", "patch", "delete", "trigger", "boost", "ext", "preserve",
                "sse", "ws", "on"].map(function (n) { return "[hx-" + n + "],[data-hx-" + n + "]"; }).join(",");
  function swapStyle(detail) {
    var xhr = detail.xhr, elt = detail.elt;
    var spec = detail.swapOverride || (xhr && xhr.getResponseHeader("HX-Reswap"));
    if (!spec && elt && elt.closest) {
      var from = elt.closest("[hx-swap],[data-hx-swap]");
      spec = from && (from.getAttribute("hx-swap") || from.getAttribute("data-hx-swap"));
    }
    if (/\bswap:/.test(spec || "")) return "";     // a delayed swap: its old content stays meanwhile
    return (spec || htmx.config.defaultSwapStyle || "").trim().split(/\s+/)[0];
  }
  // ids of the answer's out-of-band elements (the server writes hx-swap-oob="true" on an
  // element with an id: templates/macros.html error_for, the overview's errors)
  function oobIds(text) {
    var ids = [], re = /<[^<>]*\shx-swap-oob=[^<>]*>/g, m;
    while ((m = re.exec(text || ""))) {
      var id = /\sid="([^"]+)"/.exec(m[0]);
      if (id) ids.push(id[1]);
    }
    return ids;
  }
  function prune(parent, kept) {
    Array.prototype.slice.call(parent.children).forEach(function (child) {
      if (kept.indexOf(child) >= 0) return;            // left whole to htmx
      if (child.matches(SET_UP) || child.querySelector(SET_UP) ||
          kept.some(function (k) { return child.contains(k); })) prune(child, kept);
      else child.remove();
    });
  }
  document.addEventListener("htmx:beforeSwap", function (event) {
    var d = event.detail, target = d.target;
    if (!d.shouldSwap || !target || !target.isConnected) return;
    var style = swapStyle(d);
    if (style !== "innerHTML" && style !== "outerHTML") return;
    var kept = [];
    if (document.activeElement && target.contains(document.activeElement)) kept.push(document.activeElement);
    oobIds(d.serverResponse).forEach(function (id) {
      var el = document.getElementById(id);
      if (el && target.contains(el)) kept.push(el);
    });
    prune(target, kept);
  });
  // the same for an out-of-band part (a follower's: its whole content is replaced)
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var d = event.detail, target = d.target;
    if (!d.shouldSwap || !target || !target.isConnected) return;
    var kept = [];
    if (document.activeElement && target.contains(document.activeElement)) kept.push(document.activeElement);
    prune(target, kept);
  });
})();
