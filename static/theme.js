// Light or dark: the theme menu (#theme-select) sets the page's data-theme, keeps it in the
// address (?theme=, window.Explainer.setParam) and redraws every figure in its colours
// (figures.js: window.Explainer.drawAll; figure-style.js recolours them).
(function () {
  "use strict";
  function setTheme(theme) {
    document.documentElement.setAttribute("data-theme", theme);
    window.Explainer.setParam("theme", theme, "auto");
    window.Explainer.drawAll();
  }
  document.addEventListener("change", function (e) {
    if (e.target.id === "theme-select") setTheme(e.target.value);
  });
})();
