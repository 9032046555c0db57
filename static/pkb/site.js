/* Every page: mark wide tables whose box scrolls, so the hint under them shows. */
(function () {
  "use strict";
  const mark = () => document.querySelectorAll(".table-wrap, .scroll-x").forEach((box) => {
    box.classList.toggle("overflows", box.scrollWidth > box.clientWidth + 1);
  });
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
})();
