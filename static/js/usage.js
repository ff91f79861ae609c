// Job page: each worker's CPU cores and memory over the run, from /api/v1/jobs/<uid>/usage (jobs.follow.worker_usage),
// as two uPlot charts (vendored, loaded by _metrics.html): one line per worker, values on hover, drag to zoom,
// the cursor linked across both (uPlot's sync), and each role's limit from the spec as a dashed line (how close
// a worker runs to its OOM kill: the section's data-limit-<role>-<cpu|memory>). Read again every 10 s while the
// job is active (what the reconciler samples at most; the captions say so). Labels are text only.
(function () {
  const root = document.getElementById("usage");
  if (!root || typeof uPlot === "undefined") return;
  const COLORS = ["#1a5fa8", "#c0262d", "#1e7d32", "#a34c00", "#7b4ba8", "#8c564b", "#b0307f", "#0d6e7a"];
  const MAX_WORKERS = 64; // more lines would not be readable
  const REFRESH_MS = 10000;
  const CHARTS = [
    { title: "CPU (cores)", resource: "cpu", column: 1, value: (v) => (v === null || v === undefined ? "–" : v.toFixed(2)) },
    { title: "Memory", resource: "memory", column: 2, value: bytes },
  ];
  const SYNC = "job-usage"; // the two charts' cursors move together
  const LIMIT_COLORS = { trainer: "#555", pserver: "#999" };
  const plots = [];
  let drawn = ""; // the workers the charts have lines for
  // The page's one time rule (static/js/portal.js): the browser's zone, ISO-style 24-hour, the zone named.
  // portal.js is deferred: it has run by DOMContentLoaded, when the first read starts (below), not before.
  let times = null;
  function axisTime(seconds) {
    const d = new Date(seconds * 1000);
    return times ? times.clock(d).slice(0, 5) : d.toISOString().slice(11, 16);
  }
  function hoverTime(seconds) {
    const d = new Date(seconds * 1000);
    return times ? `${times.day(d)} ${times.clock(d)} ${times.zone(d)}` : d.toISOString();
  }

  function bytes(v) {
    if (v === null || v === undefined) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
  }

  // Each role's limit of `resource` among the shown workers' roles: [[role, amount]], from the spec.
  function limits(workers, resource) {
    const roles = [...new Set(workers.map((w) => w.name.split("-")[0]))];
    return roles.map((role) => [role, parseFloat(root.getAttribute(`data-limit-${role}-${resource}`))])
      .filter(([, amount]) => Number.isFinite(amount));
  }

  function data(workers, column, lines) {
    const joined = uPlot.join(workers.map((w) => [w.points.map((p) => p[0]), w.points.map((p) => p[column])]));
    return [...joined, ...lines.map(([, amount]) => joined[0].map(() => amount))];
  }

  function draw(workers) {
    const shown = workers.filter((w) => w.points.length).slice(0, MAX_WORKERS);
    document.getElementById("usage-empty").hidden = shown.length > 0;
    if (!shown.length) return;
    const holder = document.getElementById("usage-charts");
    const width = Math.max(240, holder.clientWidth || root.clientWidth - 32);
    const names = shown.map((w) => w.name).join(" ");
    if (plots.length && names !== drawn) {
      plots.splice(0).forEach((p) => p.destroy()); // a worker appeared: the lines are made again
      holder.replaceChildren();
    }
    drawn = names;
    CHARTS.forEach((chart, i) => {
      const lines = limits(shown, chart.resource);
      if (plots[i]) { plots[i].setData(data(shown, chart.column, lines)); return; }
      const figure = document.createElement("figure");
      figure.dataset.testid = "usage-chart";
      figure.dataset.resource = chart.resource;
      figure.dataset.limits = lines.map(([role]) => role).join(" ");
      const caption = document.createElement("figcaption");
      caption.textContent = `${chart.title}, sampled every ${REFRESH_MS / 1000} s${lines.length ? "; dashed: the limit" : ""}`;
      figure.append(caption);
      holder.append(figure);
      plots[i] = new uPlot({
        width, height: 200,
        axes: [{ label: `time (${times ? times.zone(new Date()) : "local"})`, values: (u, ticks) => ticks.map(axisTime) },
          { size: 90, values: (u, ticks) => ticks.map(chart.value) }],
        series: [{ label: "time", value: (u, v) => (v === null ? "–" : hoverTime(v)) }, ...shown.map((w, n) => ({
          label: w.name, stroke: COLORS[n % COLORS.length], width: 1.5, spanGaps: true, value: (u, v) => chart.value(v),
        })), ...lines.map(([role]) => ({
          label: `${role} limit`, stroke: LIMIT_COLORS[role] || "#555", width: 1, dash: [6, 4], value: (u, v) => chart.value(v),
        }))],
        // The limit is part of the y range: a line near it reads as near it.
        scales: { y: { range: (u, min, max) => [0, Math.max(max, ...lines.map(([, amount]) => amount)) * 1.05 || 1] } },
        cursor: { drag: { x: true, y: false }, sync: { key: SYNC, setSeries: false } },
      }, data(shown, chart.column, lines), figure);
    });
  }

  async function load() {
    try {
      const answer = await fetch(root.dataset.api, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!answer.ok) return;
      const body = await answer.json();
      draw(body.workers || []);
      if (["queued", "submitting", "pending", "running"].includes(body.state)) setTimeout(load, REFRESH_MS);
    } catch (error) {
      setTimeout(load, REFRESH_MS); // the portal was out of reach: try again
    }
  }
  function start() {
    times = window.paddlecloudTimes || null;
    // Drawn while its tab was hidden (0 wide), or the window resized: the charts take the holder's width.
    new ResizeObserver(() => {
      const width = document.getElementById("usage-charts").clientWidth;
      if (width > 0) plots.forEach((plot) => plot.setSize({ width: Math.max(240, width), height: 200 }));
    }).observe(document.getElementById("usage-charts"));
    load();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
