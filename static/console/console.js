/* pyrocket console: small behaviours on top of htmx.
 *
 * TPS charts: a <canvas data-sample-url="..." data-sample-every="5"> is fed by polling that URL.
 * The server answers {"at": epoch ms, "rates": {label: per-second value}} when the broker already
 * knows the rate, or {"at": ..., "counters": {label: running total}} when only totals exist (topic
 * offsets); rates are then the difference between two samples over the time between them.
 */
(function () {
  "use strict";
  const MAX_POINTS = 60;

  // Chart times as the tables print them: 24-hour UTC (the console's TIME_ZONE), whatever the
  // browser's zone and locale (en-US would say 2:05 PM in its own zone). history_charts.js uses it too.
  const pad = (n) => String(n).padStart(2, "0");
  const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  const consoleTime = {
    clock(ms, seconds) {
      const d = new Date(ms);
      return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}` + (seconds ? `:${pad(d.getUTCSeconds())}` : "");
    },
    weekdayClock(ms) {
      return `${WEEKDAYS[new Date(ms).getUTCDay()]} ${consoleTime.clock(ms)}`;
    },
    stamp(ms) {
      const d = new Date(ms);
      return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${consoleTime.clock(ms, true)} UTC`;
    },
  };
  window.consoleTime = consoleTime;

  function startChart(canvas) {
    if (canvas.dataset.started || typeof Chart === "undefined") return;
    canvas.dataset.started = "1";
    const url = canvas.dataset.sampleUrl;
    const every = Math.max(1, Number(canvas.dataset.sampleEvery || 5)) * 1000;
    const chart = new Chart(canvas, {
      type: "line",
      data: { labels: [], datasets: [] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: { y: { beginAtZero: true, title: { display: true, text: "msgs/s" } } },
        elements: { point: { radius: 0 } },
      },
    });
    let previous = null;
    const status = canvas.closest(".chart-box")?.querySelector(".chart-status");

    function series(label) {
      let set = chart.data.datasets.find((d) => d.label === label);
      if (!set) {
        set = { label: label, data: new Array(chart.data.labels.length - 1).fill(null), tension: 0.2 };
        chart.data.datasets.push(set);
      }
      return set;
    }

    async function sample() {
      if (!document.body.contains(canvas)) return;  // page navigated away (htmx swap)
      try {
        const response = await fetch(url, { headers: { Accept: "application/json" } });
        const data = await response.json();
        if (!response.ok) throw new Error(data.error || response.statusText);
        let rates = data.rates;
        if (!rates && data.counters) {
          rates = previous ? {} : null;
          if (previous) {
            const seconds = Math.max((data.at - previous.at) / 1000, 0.001);
            for (const [label, total] of Object.entries(data.counters)) {
              const before = previous.counters[label];
              rates[label] = before === undefined ? 0 : Math.max(total - before, 0) / seconds;
            }
          }
          previous = data;
        }
        if (rates) {
          chart.data.labels.push(consoleTime.clock(data.at, true));
          for (const [label, value] of Object.entries(rates)) series(label).data.push(Math.round(value * 100) / 100);
          for (const set of chart.data.datasets) {
            while (set.data.length < chart.data.labels.length) set.data.push(null);
          }
          if (chart.data.labels.length > MAX_POINTS) {
            chart.data.labels.shift();
            for (const set of chart.data.datasets) set.data.shift();
          }
          chart.update();
        }
        if (status) status.textContent = "";
      } catch (error) {
        if (status) status.textContent = "Sampling failed: " + error.message + " (retrying)";
      }
      // Totals need two samples for a first rate: take the second one soon.
      setTimeout(sample, chart.data.labels.length === 0 && previous ? 1000 : every);
    }
    sample();
  }

  function startCharts(root) {
    (root || document).querySelectorAll("canvas[data-sample-url]").forEach(startChart);
  }

  document.addEventListener("DOMContentLoaded", () => startCharts(document));
  document.addEventListener("htmx:afterSwap", (event) => startCharts(event.target));
})();

/* Message body views (text / JSON / hex): tabs that show one <pre> at a time. */
document.addEventListener("click", (event) => {
  const tab = event.target.closest("[data-body-tab]");
  if (!tab) return;
  event.preventDefault();
  const section = tab.closest("section");
  section.querySelectorAll("[data-body-tab]").forEach((t) => t.classList.toggle("active", t === tab));
  section.querySelectorAll("[data-body-view]").forEach((view) => { view.hidden = "#" + view.id !== tab.getAttribute("href"); });
});

/* Behaviours declared in the markup by data attributes, instead of inline handlers (the
 * Content-Security-Policy allows no inline script):
 *   <form data-confirm="question">      submitting asks first; "Cancel" keeps the form unsent
 *   <button data-confirm="question">    the same for one button of a form
 *   <select data-autosubmit>            choosing an option submits its form
 *   <input type=checkbox data-select-all="ids">  (un)checks every checkbox named "ids"
 *   <select data-fill-fields="a b">     an option's value holds lines; each goes to the form's
 *                                       field of that name, in order
 */
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) event.preventDefault();
}, true);

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-confirm]");
  if (button && !window.confirm(button.dataset.confirm)) event.preventDefault();
  const all = event.target.closest("input[data-select-all]");
  if (all) {
    document.querySelectorAll(`input[name="${CSS.escape(all.dataset.selectAll)}"]`).forEach((box) => { box.checked = all.checked; });
  }
}, true);

document.addEventListener("change", (event) => {
  const select = event.target;
  if (!(select instanceof HTMLSelectElement)) return;
  if (select.hasAttribute("data-autosubmit")) select.form.requestSubmit();
  if (select.dataset.fillFields) {
    const values = select.value.split("\n");
    select.dataset.fillFields.split(" ").forEach((name, i) => { select.form.elements[name].value = values[i] || ""; });
  }
});
