// The page view's block picking. Document text is put on the page with textContent only; the
// block data comes from a JSON element (never evaluated, never inserted as HTML).
"use strict";
(function () {
  const data = document.getElementById("blocks-data");
  if (!data) return;
  const blocks = new Map(JSON.parse(data.textContent).map((b) => [String(b.block_no), b]));
  let picked = null;

  function marks(no) {
    return document.querySelectorAll('[data-block="' + CSS.escape(no) + '"]');
  }
  function show(no) {
    const b = blocks.get(no);
    if (!b) return;
    document.getElementById("picked-no").textContent = no;
    document.getElementById("picked-label").textContent = b.label;
    const text = document.getElementById("picked-text");
    text.textContent = b.text;
    text.className = "";
  }
  function setClass(no, name, on) {
    marks(no).forEach((el) => el.classList.toggle(name, on));
  }
  function pick(no) {
    if (picked !== null) setClass(picked, "picked", false);
    picked = no;
    setClass(no, "picked", true);
    show(no);
  }
  document.querySelectorAll("svg#page g.block, ol.blocks li, table.grid[data-block]").forEach((el) => {
    const no = el.dataset.block;
    el.addEventListener("mouseenter", () => { setClass(no, "hover", true); show(no); });
    el.addEventListener("mouseleave", () => { setClass(no, "hover", false); if (picked !== null) show(picked); });
    el.addEventListener("click", () => pick(no));
  });
  const first = document.querySelector("g.block.picked");
  if (first) pick(first.dataset.block);
})();
