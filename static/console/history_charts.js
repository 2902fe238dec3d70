/* pyrocket console: metric history charts (history/_charts.html, the history page).
 *
 * <figure data-history-url="..."> holds a window switch (hour / day / week), a canvas and a status
 * line. Its URL answers {"lines": [{"label", "unit", "points": [[epoch ms, value], ...]}], "since",
 * "until", "step_seconds", "sample_seconds", "points"}; the chart is drawn from the stored history
 * at once (nothing is sampled by the page) and reloaded every sampling interval while it shows the
 * last hour. No points: a "no history yet" note instead of an empty canvas; a failed request: its
 * reason, and another try later.
 * <canvas data-daily-url="..."> (history page) is a bar chart of messages in and out per day.
 * Chart.js is loaded from the script tag's data-chart-js unless the page already has it (the CSP
 * allows scripts of the console's own origin only, never inline ones).
 */
(function () {
  "use strict";
  const script = document.currentScript;
  const chartSource = script ? script.dataset.chartJs : null;
  let chartLoading = null;
  const WINDOW_LABEL = { hour: "the last hour", day: "the last day", week: "the last week" };
  const DAY_OR_WEEK_REFRESH_MS = 5 * 60 * 1000;

  function loadChartJs() {
    if (typeof Chart !== "undefined") return Promise.resolve();
    if (!chartLoading) {
      chartLoading = new Promise((resolve, reject) => {
        const tag = document.createElement("script");
        tag.src = chartSource;
        tag.onload = () => resolve();
        tag.onerror = () => reject(new Error("the chart library did not load"));
        document.head.appendChild(tag);
      });
    }
    return chartLoading;
  }

  // 24-hour UTC, as the tables (console.js's consoleTime).
  function tickFormat(window) {
    return window === "week" ? (value) => consoleTime.weekdayClock(value) : (value) => consoleTime.clock(value);
  }

  // A gap in the samples (sampler stopped, broker down) is drawn as a gap, not a straight line.
  function withGaps(points, expectedMs) {
    const out = [];
    let previous = null;
    for (const [at, value] of points) {
      if (previous !== null && at - previous > 3 * expectedMs) out.push({ x: previous + expectedMs, y: null });
      out.push({ x: at, y: value });
      previous = at;
    }
    return out;
  }

  // Ticks on round UTC times (every 10 min, 3 h, a day) rather than wherever the window starts.
  const TICK_MS = { hour: 10 * 60 * 1000, day: 3 * 3600 * 1000, week: 24 * 3600 * 1000 };

  function roundTicks(window) {
    return (axis) => {
      const step = TICK_MS[window];
      const ticks = [];
      for (let at = Math.ceil(axis.min / step) * step; at <= axis.max; at += step) ticks.push({ value: at });
      axis.ticks = ticks;
    };
  }

  function axes(data) {
    const units = [...new Set(data.lines.map((line) => line.unit))].slice(0, 2);
    const scales = {
      x: {
        type: "linear", min: data.since, max: data.until,
        afterBuildTicks: roundTicks(data.window),
        ticks: { callback: tickFormat(data.window) },
      },
    };
    units.forEach((unit, i) => {
      scales[i === 0 ? "y" : "y1"] = {
        beginAtZero: true, position: i === 0 ? "left" : "right",
        title: { display: true, text: unit }, grid: { drawOnChartArea: i === 0 },
      };
    });
    return { units, scales };
  }

  function datasets(data, units) {
    const expectedMs = 1000 * (data.step_seconds || data.sample_seconds || 30);
    return data.lines.map((line) => ({
      label: line.label,
      data: withGaps(line.points, expectedMs),
      yAxisID: units.indexOf(line.unit) === 1 ? "y1" : "y",
      tension: 0.2, spanGaps: false,
      pointRadius: line.points.length <= 60 ? 2 : 0,  // a few samples are dots, not an invisible line
    }));
  }

  function draw(figure, data) {
    const { units, scales } = axes(data);
    const sets = datasets(data, units);
    if (figure.historyChart) {
      figure.historyChart.data.datasets = sets;
      figure.historyChart.options.scales = scales;
      figure.historyChart.update();
      return;
    }
    figure.historyChart = new Chart(figure.querySelector("canvas"), {
      type: "line",
      data: { datasets: sets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: true,
        interaction: { mode: "nearest", axis: "x", intersect: false },
        elements: { point: { radius: 0 } },
        scales: scales,
        plugins: {
          tooltip: { callbacks: { title: (items) => items.length ? consoleTime.stamp(items[0].parsed.x) : "" } },
        },
      },
    });
  }

  function showStatus(figure, text, kind) {
    const status = figure.querySelector(".history-status");
    status.textContent = text;
    status.classList.toggle("history-empty", kind === "empty");
    status.classList.toggle("history-error", kind === "error");
  }

  async function fetchJson(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    let data = null;
    try { data = await response.json(); } catch (error) { data = null; }
    if (!response.ok) throw new Error((data && data.error) || `HTTP ${response.status}`);
    if (data === null) throw new Error("the answer was not JSON");
    return data;
  }

  async function load(figure) {
    clearTimeout(figure.historyTimer);
    if (!document.body.contains(figure)) return;  // the page moved on (htmx swap)
    const window = figure.dataset.window;
    const url = new URL(figure.dataset.historyUrl, document.baseURI);
    url.searchParams.set("window", window);
    const box = figure.querySelector(".chart");
    const asked = (figure.historyRequest = (figure.historyRequest || 0) + 1);
    let retryMs = DAY_OR_WEEK_REFRESH_MS;
    try {
      const [data] = await Promise.all([fetchJson(url), loadChartJs()]);
      if (asked !== figure.historyRequest) return;  // a newer window was chosen meanwhile
      retryMs = window === "hour" ? Math.max(10, data.sample_seconds || 30) * 1000 : DAY_OR_WEEK_REFRESH_MS;
      figure.dataset.points = String(data.points);
      if (data.points === 0) {
        box.hidden = true;
        showStatus(figure, `No history for ${WINDOW_LABEL[window]} yet — the sampler runs every ${data.sample_seconds} s.`, "empty");
      } else {
        box.hidden = false;
        draw(figure, data);
        showStatus(figure, data.truncated ? "Only the first lines are drawn (too many brokers for one chart)." : "", "");
      }
      figure.dataset.state = data.points === 0 ? "empty" : "drawn";
    } catch (error) {
      if (asked !== figure.historyRequest) return;
      retryMs = 30 * 1000;
      figure.dataset.state = "error";
      if (!figure.historyChart) box.hidden = true;
      showStatus(figure, `History could not be loaded: ${error.message}. Trying again in 30 s.`, "error");
    }
    figure.historyTimer = setTimeout(() => load(figure), retryMs);
  }

  function startFigure(figure) {
    if (figure.dataset.started) return;
    figure.dataset.started = "1";
    figure.querySelectorAll(".window-switch button[data-window]").forEach((button) => {
      button.addEventListener("click", () => {
        figure.dataset.window = button.dataset.window;
        figure.querySelectorAll(".window-switch button").forEach((b) => b.setAttribute("aria-pressed", String(b === button)));
        load(figure);
      });
    });
    load(figure);
  }

  async function startDaily(canvas) {
    if (canvas.dataset.started) return;
    canvas.dataset.started = "1";
    const status = canvas.closest(".card").querySelector(".history-status");
    try {
      const [data] = await Promise.all([fetchJson(canvas.dataset.dailyUrl), loadChartJs()]);
      new Chart(canvas, {
        type: "bar",
        data: {
          labels: data.days.map((row) => row.day),
          datasets: [
            { label: "messages in", data: data.days.map((row) => row.in) },
            { label: "messages out", data: data.days.map((row) => row.out) },
          ],
        },
        options: { animation: false, responsive: true, maintainAspectRatio: false, scales: { y: { beginAtZero: true } } },
      });
      canvas.dataset.state = "drawn";
    } catch (error) {
      canvas.dataset.state = "error";
      canvas.parentElement.hidden = true;
      if (status) {
        status.textContent = `Daily totals could not be loaded: ${error.message}.`;
        status.classList.add("history-error");
      }
    }
  }

  function start(root) {
    (root || document).querySelectorAll("figure[data-history-url]").forEach(startFigure);
    (root || document).querySelectorAll("canvas[data-daily-url]").forEach(startDaily);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => start(document));
  else start(document);
  document.addEventListener("htmx:afterSwap", (event) => start(event.target));
})();
