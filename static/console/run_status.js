/* A running report's progress without htmx (not loaded, or blocked): poll the same fragment htmx
 * would (the URL in #run-status's hx-get), until the run finishes, then reload for its results. */
(function () {
  "use strict";
  function poll() {
    if (window.htmx) return;  // htmx polls the fragment itself
    const box = document.getElementById("run-status");
    const url = box && box.getAttribute("hx-get");
    if (!url || box.dataset.status === "done" || box.dataset.status === "failed") return;
    fetch(url, { credentials: "same-origin" })
      .then((response) => response.text())
      .then((html) => {
        const next = new DOMParser().parseFromString(html, "text/html").getElementById("run-status");
        if (next.dataset.status === "done" || next.dataset.status === "failed") { location.reload(); return; }
        box.replaceWith(next);
        setTimeout(poll, 1000);
      })
      .catch(() => setTimeout(poll, 3000));
  }
  setTimeout(poll, 1000);
})();
