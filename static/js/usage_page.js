// The usage page: CPU core-hours asked (held) and used (measured) by UTC day, and GPU hours, as a uPlot chart
// (vendored) of the page's own figures (the JSON the server put in #usage-days's data-chart with the tables). Drawn
// again after each htmx refresh of the section. Hover shows a day's figures; drag to zoom, double-click resets.
(function () {
  const COLORS = { asked: "#1a5fa8", used: "#1e7d32", gpu: "#a34c00" };
  let plot = null;

  function number(v) {
    return v === null || v === undefined ? "–" : String(parseFloat(Number(v).toPrecision(4)));
  }

  function draw() {
    const holder = document.getElementById("usage-days");
    if (plot) { plot.destroy(); plot = null; }
    if (!holder || !holder.dataset.chart || typeof uPlot === "undefined") return;
    const chart = JSON.parse(holder.dataset.chart);
    if (!chart.days.length) return;
    const xs = chart.days.map((day) => Date.parse(`${day}T00:00:00Z`) / 1000);
    plot = new uPlot({
      width: Math.max(240, Math.min(holder.clientWidth || 640, 1000)), height: 220,
      scales: { x: { time: true, range: () => chart.window } },
      axes: [{ values: (u, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(5, 10)) },
        { size: 60, values: (u, ticks) => ticks.map(number) }],
      series: [
        { label: "day (UTC)", value: (u, v) => (v === null ? "–" : new Date(v * 1000).toISOString().slice(0, 10)) },
        { label: "core-hours asked", stroke: COLORS.asked, width: 2, points: { show: true }, value: (u, v) => number(v) },
        { label: "core-hours used", stroke: COLORS.used, width: 2, points: { show: true }, value: (u, v) => number(v) },
        { label: "GPU hours", stroke: COLORS.gpu, width: 1.5, dash: [6, 4], value: (u, v) => number(v) },
      ],
      cursor: { drag: { x: true, y: false } },
    }, [xs, chart.asked, chart.used, chart.gpu], holder);
    holder.dataset.drawn = String(chart.days.length);
  }

  document.addEventListener("DOMContentLoaded", draw);
  // The section is swapped whole every 10 s: its new chart holder is empty until drawn again.
  document.addEventListener("htmx:afterSettle", () => {
    const holder = document.getElementById("usage-days");
    if (holder && !holder.querySelector("canvas")) draw();
  });
})();
