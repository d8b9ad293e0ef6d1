// The slim map of sections sticks to the top of the window: what scrolls into view stops below
// it (static/style.css: scroll-padding-top from --ov-map-h), at whatever height its names wrap
// to on this screen. (overview.js marks the section being read in it; anchor.js measures it.)
(function () {
  "use strict";
  function keep(map) {
    var set = function () {
      document.documentElement.style.setProperty("--ov-map-h", map.offsetHeight + "px");
    };
    set();
    if ("ResizeObserver" in window) new ResizeObserver(set).observe(map);
    else window.addEventListener("resize", set);
  }
  function start() { var map = document.getElementById("ov-map"); if (map) keep(map); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
