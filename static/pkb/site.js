/* Every page: mark wide tables whose box scrolls, so the hint under them shows. */
(function () {
  "use strict";
  const mark = () => document.querySelectorAll(".table-wrap, .scroll-x").forEach((box) => {
    box.classList.toggle("overflows", box.scrollWidth > box.clientWidth + 1);
  });
  // Tables that stack into cards on a phone label each cell with its column's header.
  const label = () => document.querySelectorAll("table.stack").forEach((table) => {
    const heads = Array.from(table.querySelectorAll("thead th")).map((th) => th.textContent.trim());
    table.querySelectorAll("tbody tr").forEach((row) => Array.from(row.children).forEach((cell, i) => {
      if (heads[i] && cell.tagName === "TD" && !cell.hasAttribute("colspan")) cell.dataset.label = heads[i];
    }));
  });
  document.addEventListener("DOMContentLoaded", label);
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
})();
