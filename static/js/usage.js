// Job page: each worker's CPU cores and memory over the run, from /api/v1/jobs/<uid>/usage (jobs.follow.worker_usage),
// as two uPlot charts (vendored, loaded by _metrics.html): one line per worker, values on hover, drag to zoom.
// Read again every 10 s while the job is active (what the reconciler samples at most). Labels are text only.
(function () {
  const root = document.getElementById("usage");
  if (!root || typeof uPlot === "undefined") return;
  const COLORS = ["#1a5fa8", "#c0262d", "#1e7d32", "#a34c00", "#7b4ba8", "#8c564b", "#b0307f", "#0d6e7a"];
  const MAX_WORKERS = 64; // more lines would not be readable
  const REFRESH_MS = 10000;
  const CHARTS = [
    { title: "CPU (cores)", column: 1, value: (v) => (v === null || v === undefined ? "–" : v.toFixed(2)) },
    { title: "Memory", column: 2, value: bytes },
  ];
  const plots = [];
  // The page's one time rule (static/js/portal.js): the browser's zone, ISO-style 24-hour, the zone named.
  const times = window.paddlecloudTimes;
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

  function data(workers, column) {
    return uPlot.join(workers.map((w) => [w.points.map((p) => p[0]), w.points.map((p) => p[column])]));
  }

  function draw(workers) {
    const shown = workers.filter((w) => w.points.length).slice(0, MAX_WORKERS);
    document.getElementById("usage-empty").hidden = shown.length > 0;
    if (!shown.length) return;
    const holder = document.getElementById("usage-charts");
    const width = Math.max(240, holder.clientWidth || root.clientWidth - 32);
    if (plots.length && plots[0].series.length - 1 !== shown.length) {
      plots.splice(0).forEach((p) => p.destroy()); // a worker appeared: the lines are made again
      holder.replaceChildren();
    }
    CHARTS.forEach((chart, i) => {
      if (plots[i]) { plots[i].setData(data(shown, chart.column)); return; }
      const figure = document.createElement("figure");
      figure.dataset.testid = "usage-chart";
      const caption = document.createElement("figcaption");
      caption.textContent = chart.title;
      figure.append(caption);
      holder.append(figure);
      plots[i] = new uPlot({
        width, height: 200,
        axes: [{ label: `time (${times ? times.zone(new Date()) : "local"})`, values: (u, ticks) => ticks.map(axisTime) },
          { size: 90, values: (u, ticks) => ticks.map(chart.value) }],
        series: [{ label: "time", value: (u, v) => (v === null ? "–" : hoverTime(v)) }, ...shown.map((w, n) => ({
          label: w.name, stroke: COLORS[n % COLORS.length], width: 1.5, spanGaps: true, value: (u, v) => chart.value(v),
        }))],
        cursor: { drag: { x: true, y: false } },
      }, data(shown, chart.column), figure);
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
  load();
})();
