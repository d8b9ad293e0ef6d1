// Predict, then reveal: a section's question (the `predict` macro, templates/macros.html) asks
// for a guess before its answer is shown; "Just show me" shows it without one. The answer also
// appears elsewhere (a prediction's data-gate ids, every place marked data-answer-of: the
// overview's top token, a section's answer_gate, web/presentation/answers.py), blurred until it
// is shown. In presentation mode (present.js) answers are shown for the presentation only.
// Shared on window.Explainer.predict: restore(root), revealAll(slide) (present.js's R key),
// forgetPresentation() (present.js, when it ends).
(function () {
  "use strict";
  var presenting = window.Explainer.presenting;

  // A guess is kept in this browser under the prediction's key (its id and the model's answer);
  // "Just show me" keeps an empty guess there: the answer was shown without a guess. The answer
  // is shown elsewhere too: the elements named by a prediction's data-gate, and every place
  // marked data-answer-of (the overview's top token before any step, a section's answer_gate),
  // stay blurred until then.
  var NO_GUESS = "";
  var presentShown = {};          // keys revealed during this presentation (none stored)

  function keyOf(id, answer) { return "predict:" + id + ":" + answer; }
  function guessKey(box) { return keyOf(box.getAttribute("data-predict"), box.getAttribute("data-answer")); }
  function saved(key) {
    try { return window.localStorage.getItem(key); } catch (e) { return null; }
  }
  function keep(key, guess) {
    try { window.localStorage.setItem(key, guess); } catch (e) { /* private mode */ }
  }

  function verdict(kind, guess, answer) {
    if (guess === NO_GUESS) return "Shown without a guess.";
    if (kind === "number") {
      var g = Number(guess), a = Number(answer);
      if (!isFinite(g)) return "";
      if (g === a) return "Exactly right.";
      var ratio = a === 0 ? Infinity : g / a;
      return "You were off by a factor of " + (ratio >= 1 ? ratio : 1 / ratio).toPrecision(3) + ".";
    }
    var same = guess.trim().toLowerCase() === String(answer).trim().toLowerCase();
    return same ? "Right!" : "Not this time.";
  }

  // The places that show this answer: the overview's boxes and every section's answer_gate
  // (templates/macros.html; web/presentation/answers.py computes the same key as the question).
  function answerBoxes(id, answer, root) {
    return Array.prototype.slice.call((root || document).querySelectorAll("[data-answer-of]"))
      .filter(function (el) {
        return el.getAttribute("data-answer-of") === id && el.getAttribute("data-answer") === answer;
      });
  }

  function gate(box, closed) {
    (box.getAttribute("data-gate") || "").split(/\s+/).forEach(function (id) {
      var el = id && document.getElementById(id);
      if (el) el.classList.toggle("gated", closed);
    });
    answerBoxes(box.getAttribute("data-predict"), box.getAttribute("data-answer")).forEach(function (el) {
      el.classList.toggle("gated", closed);
    });
  }

  function reveal(box, guess) {
    gate(box, false);
    var skipped = guess === NO_GUESS;
    box.querySelector(".predict-guess").textContent = guess;
    var you = box.querySelector(".predict-you");
    if (you) you.hidden = skipped;
    box.querySelector(".predict-verdict").textContent =
      verdict(box.getAttribute("data-kind"), guess, box.getAttribute("data-answer"));
    box.querySelector(".predict-reveal").hidden = false;
    box.querySelector(".predict-commit").disabled = true;
    box.querySelectorAll("input").forEach(function (i) { i.disabled = true; });
    box.classList.add("revealed");
    box.classList.toggle("skipped", skipped);
    if (presenting()) {
      box.setAttribute("data-shown-in", "present");
      presentShown[guessKey(box)] = true;
    }
  }

  // The answer of prediction `id` is shown: every box of that prediction on the page says so
  // (without a guess, unless one was made), and every element that shows the answer is unblurred.
  function showAnswer(id, answer, guess) {
    var key = keyOf(id, answer);
    if (presenting()) presentShown[key] = true;
    else if (saved(key) === null) keep(key, guess);
    document.querySelectorAll(".predict[data-predict]").forEach(function (box) {
      if (box.getAttribute("data-predict") === id && box.getAttribute("data-answer") === answer &&
          !box.classList.contains("revealed")) reveal(box, guess);
    });
    answerBoxes(id, answer).forEach(function (el) { el.classList.remove("gated"); });
  }

  function commit(box) {
    var guess;
    if (box.getAttribute("data-kind") === "choice") {
      var picked = box.querySelector("input[type=radio]:checked");
      guess = picked ? picked.value : "";
    } else {
      guess = box.querySelector(".predict-input").value;
    }
    if (!guess.trim()) {
      box.querySelector(".predict-q").classList.add("need-guess");
      return;
    }
    keep(guessKey(box), guess);
    box.setAttribute("data-guess-recorded", "true");
    reveal(box, guess);
    answerBoxes(box.getAttribute("data-predict"), box.getAttribute("data-answer")).forEach(function (el) {
      el.classList.remove("gated");
    });
  }

  function skip(box) {
    if (!presenting()) keep(guessKey(box), NO_GUESS);
    reveal(box, NO_GUESS);
  }

  // A guess kept in this browser reveals its answer when the page loads. Not in presentation
  // mode: the presenter's own earlier guesses would give the answers away to the room; there a
  // prediction shows its answer only once revealed during the presentation (R, or its buttons).
  function restorePredictions(root) {
    root.querySelectorAll(".predict").forEach(function (box) {
      var kept = saved(guessKey(box));
      if (presenting() && box.getAttribute("data-shown-in") !== "present") conceal(box);
      else if (kept !== null && !presenting()) reveal(box, kept);
      else if (!box.classList.contains("revealed")) gate(box, true);
    });
    // the overview's boxes that show an answer: blurred until it is shown, in this browser, or
    // in this presentation
    var boxes = root.matches && root.matches("[data-answer-of]") ? [root] : [];
    root.querySelectorAll("[data-answer-of]").forEach(function (el) { boxes.push(el); });
    boxes.forEach(function (el) {
      var key = keyOf(el.getAttribute("data-answer-of"), el.getAttribute("data-answer"));
      el.classList.toggle("gated", presenting() ? !presentShown[key] : saved(key) === null);
    });
  }

  function conceal(box) {
    gate(box, true);
    box.querySelector(".predict-reveal").hidden = true;
    box.querySelector(".predict-commit").disabled = false;
    box.querySelectorAll("input").forEach(function (i) { i.disabled = false; });
    box.classList.remove("revealed");
  }

  // The overview's own way to its hidden answer: its "show" button, or a step of the loop (Next
  // token, Play), which puts the model's choice on screen anyway.
  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target.closest(".ov-reveal, #ov-next, #ov-play, .answer-reveal") : null;
    if (!t) return;
    if (t.classList.contains("answer-reveal")) {     // a section's place: its own question's answer
      var place = t.closest("[data-answer-of]");
      showAnswer(place.getAttribute("data-answer-of"), place.getAttribute("data-answer"), NO_GUESS);
      return;
    }
    document.querySelectorAll(".ov-gate.gated[data-answer-of]").forEach(function (el) {
      showAnswer(el.getAttribute("data-answer-of"), el.getAttribute("data-answer"), NO_GUESS);
    });
  }, true);

  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target.closest("button") : null;
    if (!t) return;
    if (t.classList.contains("predict-commit")) commit(t.closest(".predict"));
    else if (t.classList.contains("predict-skip")) skip(t.closest(".predict"));
  });

  window.Explainer.predict = {
    restore: restorePredictions,
    // every prediction of the slide, and every place showing one of its answers, shown
    revealAll: function (slide) {
      slide.querySelectorAll(".predict:not(.revealed)").forEach(function (box) { reveal(box, NO_GUESS); });
      slide.querySelectorAll(".gated[data-answer-of]").forEach(function (el) {
        showAnswer(el.getAttribute("data-answer-of"), el.getAttribute("data-answer"), NO_GUESS);
      });
    },
    // a new presentation starts with every answer hidden again
    forgetPresentation: function () {
      document.querySelectorAll(".predict[data-shown-in]").forEach(function (box) {
        box.removeAttribute("data-shown-in");
      });
      presentShown = {};
    }
  };
  if (typeof htmx !== "undefined") htmx.onLoad(restorePredictions);
  else document.addEventListener("DOMContentLoaded", function () { restorePredictions(document.body); });
})();
