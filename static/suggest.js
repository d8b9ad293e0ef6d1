// Suggested prompts (the model's own, under the prompt box): a click puts the prompt in the
// box and runs it, as typing it and pressing Run would. Talks to no other file.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.suggest");
    if (!button) return;
    var box = document.getElementById("prompt-input");
    var form = document.getElementById("state");
    if (!box || !form) return;
    box.value = button.getAttribute("data-prompt");
    form.requestSubmit();
  });
})();
