/* Live tail page: one websocket on the tailed topic (console.tail.consumer), rows newest first,
 * at most data-limit of them kept.
 *
 * The filter is applied on the socket, never by reloading: saving it (htmx) or picking a saved
 * filter of this topic applies it in place and keeps the rows. While paused the server holds the
 * matching messages and sends them when the tail resumes; the page only says how many wait.
 */
(function () {
  "use strict";

  function start(root) {
    const topic = root.dataset.topic;
    const limit = Number(root.dataset.limit);
    const traceUrl = root.dataset.traceUrl;
    const log = document.getElementById("tail-log");
    const status = document.getElementById("tail-status");
    const filterForm = document.getElementById("filter-form");
    const filterError = document.getElementById("filter-error");
    const pauseButton = document.getElementById("pause");
    const saveForm = document.getElementById("save-filter");
    const arrivals = [];
    let skipped = 0;
    let paused = false;
    let socket = null;

    const cell = (text, cls) => {
      const td = document.createElement("td");
      td.textContent = text;
      if (cls) td.className = cls;
      return td;
    };
    const currentFilter = () => Object.fromEntries(["tags", "sql", "key"].map((k) => [k, filterForm.elements[k].value]));
    const send = (message) => {
      if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
    };
    const applyFilter = () => send({ action: "filter", ...currentFilter() });
    const setStatus = (text, state) => {
      status.textContent = text;
      status.dataset.state = state;
    };

    function addRow(e) {
      const tr = document.createElement("tr");
      tr.dataset.msgId = e.msgId;
      const idCell = cell("", "mono");
      const link = document.createElement("a");
      link.href = `${traceUrl}?msgId=${encodeURIComponent(e.msgId)}&topic=${encodeURIComponent(e.topic)}`;
      link.textContent = e.msgId;
      idCell.append(link);
      tr.append(cell(new Date(e.storeTimestamp).toISOString().replace("T", " ").slice(0, 23)), idCell,
        cell(e.tags), cell(e.keys.join(" ")), cell(`${e.broker}/${e.queueId}@${e.queueOffset}`),
        cell(e.body + (e.truncated ? " …" : ""), "mono"));
      log.prepend(tr);
      while (log.rows.length > limit) log.deleteRow(log.rows.length - 1);
    }

    function showMessages(data) {
      const now = Date.now();
      data.events.forEach((e) => { addRow(e); arrivals.push(now); });
      skipped += data.skipped;
      document.getElementById("tail-count").textContent = log.rows.length;
      document.getElementById("tail-skipped").textContent = skipped;
    }

    function describeFilter(f) {
      const parts = [];
      if (f.tags && f.tags !== "*") parts.push(`tags ${f.tags}`);
      if (f.sql) parts.push(`SQL ${f.sql}`);
      if (f.key) parts.push(`key contains ${f.key}`);
      return parts.join(", ") || "none";
    }

    function heldText(held, dropped) {
      return `${held} matching message${held === 1 ? "" : "s"} held` +
        (dropped ? ` (${dropped} older dropped: only the last ${limit} are kept)` : "");
    }

    const handlers = {
      messages: showMessages,
      status: (data) => {
        if (paused) return;  // the pause is what the user needs to see; the tail goes on behind it
        setStatus(data.status === "live" ? `live (${data.queues} queues)` : `${data.status}: ${data.reason || ""}`, data.status);
      },
      filter: (data) => {
        filterError.hidden = data.ok;
        filterError.textContent = data.ok ? "" : data.error;
        if (data.ok) document.getElementById("tail-filter").textContent = describeFilter(data.filter);
      },
      paused: () => setStatus("paused", "paused"),
      held: (data) => setStatus(`paused — ${heldText(data.held, data.dropped)}`, "paused"),
      resumed: (data) => setStatus(data.missed ? `live — ${heldText(data.held, data.dropped)} while paused, shown` : "live", "live"),
    };

    function connect() {
      const scheme = location.protocol === "https:" ? "wss" : "ws";
      socket = new WebSocket(`${scheme}://${location.host}/ws/tail/${encodeURIComponent(topic)}/`);
      socket.onopen = () => {
        setStatus("connected", "connected");
        applyFilter();
        if (paused) send({ action: "pause" });
      };
      socket.onclose = (ev) => {
        setStatus(ev.code === 4403 ? "not allowed: log in again" : "disconnected — reconnecting", "closed");
        if (ev.code !== 4403 && ev.code !== 4400) setTimeout(connect, 2000);
      };
      socket.onmessage = (ev) => {
        const data = JSON.parse(ev.data);
        const handle = handlers[data.type];
        if (handle) handle(data);
      };
    }

    setInterval(() => {
      const cutoff = Date.now() - 5000;
      while (arrivals.length && arrivals[0] < cutoff) arrivals.shift();
      document.getElementById("tail-rate").textContent = (arrivals.length / 5).toFixed(1);
    }, 1000);

    filterForm.addEventListener("submit", (ev) => {
      ev.preventDefault();
      applyFilter();
    });
    pauseButton.addEventListener("click", () => {
      paused = !paused;
      send({ action: paused ? "pause" : "resume" });
      pauseButton.textContent = paused ? "Resume" : "Pause";
      pauseButton.setAttribute("aria-pressed", String(paused));
    });
    if (saveForm) {
      // The filter saved is the one in the filter form; once saved it is also the one applied.
      saveForm.addEventListener("htmx:configRequest", (ev) => Object.assign(ev.detail.parameters, currentFilter()));
      saveForm.addEventListener("htmx:afterRequest", (ev) => { if (ev.detail.successful) applyFilter(); });
    }
    // A saved filter of this topic (or of any topic) is applied here, in place.
    document.addEventListener("click", (ev) => {
      const link = ev.target.closest("a[data-saved-filter]");
      if (!link || (link.dataset.topic && link.dataset.topic !== topic)) return;
      ev.preventDefault();
      for (const k of ["tags", "sql", "key"]) filterForm.elements[k].value = link.dataset[k];
      history.replaceState(null, "", link.href);
      applyFilter();
    });
    connect();
  }

  document.addEventListener("DOMContentLoaded", () => {
    const root = document.getElementById("tail");
    if (root) start(root);
  });
})();
