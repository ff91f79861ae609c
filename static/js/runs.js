// Runs side by side (the experiment page, /compare/): one metric's curves overlaid with uPlot (the job page's
// chart library), each run coloured by a param the reader picks, with a log scale and smoothing; and, where the
// page has a #parcoords, the params against the metric as parallel coordinates (Apache ECharts, vendored:
// static/vendor/echarts-parallel.min.js). The data is one JSON answer from the root's data-api: {metric, goal,
// params, runs: [{label, href, state, params, best, active, points: [[step, value]]}]}; it is read again every
// 15 s while a run is active. Text is set with textContent only (never HTML).
(function () {
  const root = document.getElementById("runs");
  if (!root || typeof uPlot === "undefined") return;
  const chartBox = document.getElementById("runs-chart");
  const colorBy = document.getElementById("runs-color-by");
  const logBox = document.getElementById("runs-log");
  const smoothing = document.getElementById("runs-smoothing");
  const key = document.getElementById("runs-key");
  const parcoordsBox = document.getElementById("parcoords");
  const HEIGHT = 300;
  const PALETTE = ["#1a5fa8", "#c0262d", "#1e7d32", "#a34c00", "#7b4ba8", "#8c564b", "#b0307f", "#0d6e7a"];
  let data = null;
  let plot = null;
  let parcoords = null;

  // A colour from blue (low) to red (high) for a value's rank among the runs' values of a numeric param.
  function ramp(fraction) {
    const from = [26, 95, 168], to = [192, 38, 45];
    const mix = from.map((c, i) => Math.round(c + (to[i] - c) * fraction));
    return `rgb(${mix[0]},${mix[1]},${mix[2]})`;
  }

  function colours(runs, param) {
    if (!param) return runs.map((_, i) => PALETTE[i % PALETTE.length]);
    const values = runs.map((r) => r.params[param]);
    if (values.every((v) => typeof v === "number")) {
      const sorted = [...new Set(values)].sort((a, b) => a - b);
      return values.map((v) => ramp(sorted.length > 1 ? sorted.indexOf(v) / (sorted.length - 1) : 0));
    }
    const kinds = [...new Set(values.map(String))];
    return values.map((v) => PALETTE[kinds.indexOf(String(v)) % PALETTE.length]);
  }

  function number(v) {
    if (v === null || v === undefined) return "–";
    const size = Math.abs(v);
    return size !== 0 && (size >= 1e5 || size < 1e-2) ? v.toExponential(2) : v.toPrecision(4);
  }

  function smooth(ys, weight) {
    if (!weight) return ys;
    let last = ys[0];
    return ys.map((y) => (last = y === null ? last : weight * last + (1 - weight) * y));
  }

  function drawKey(runs, colourOf, param) {
    key.replaceChildren();
    if (!param) return;
    const values = runs.map((r) => r.params[param]);
    const seen = new Map();
    values.forEach((v, i) => { if (!seen.has(String(v))) seen.set(String(v), colourOf[i]); });
    for (const [value, colour] of [...seen].slice(0, 12)) {
      const item = document.createElement("span");
      item.className = "runs-key-item";
      const swatch = document.createElement("span");
      swatch.className = "runs-swatch";
      swatch.style.backgroundColor = colour;
      item.append(swatch, `${param}=${value}`);
      key.append(item);
    }
  }

  function drawCurves() {
    const runs = data.runs.filter((r) => r.points.length);
    const empty = document.getElementById("runs-empty");
    empty.hidden = runs.length > 0;
    if (plot) { plot.destroy(); plot = null; }
    if (!runs.length) return;
    const param = colorBy ? colorBy.value : "";
    const colourOf = colours(runs, param);
    const weight = smoothing ? parseFloat(smoothing.value) : 0;
    const tables = runs.map((r) => [r.points.map((p) => p[0]), smooth(r.points.map((p) => p[1]), weight)]);
    const log = logBox && logBox.checked && runs.every((r) => r.points.every((p) => p[1] > 0));
    const options = {
      width: Math.max(chartBox.clientWidth, 280), height: HEIGHT,
      scales: { x: { time: false }, y: log ? { distr: 3, log: 10 } : {} },
      axes: [{ label: "step" }, { label: data.metric, size: 64, values: (u, ticks) => ticks.map(number) }],
      series: [{ label: "step" }, ...runs.map((r, i) => ({
        label: r.label, stroke: colourOf[i], width: 1.5, spanGaps: true, value: (u, v) => number(v),
      }))],
      cursor: { drag: { x: true, y: false } },
    };
    plot = new uPlot(options, uPlot.join(tables), chartBox);
    drawKey(runs, colourOf, param);
  }

  // Parallel coordinates: one axis per param (numbers on a value axis, anything else as categories), then the
  // metric's best value; each run one line, coloured by that value (the best end dark).
  function drawParcoords() {
    if (!parcoordsBox || typeof echarts === "undefined") return;
    const runs = data.runs.filter((r) => r.best !== null && r.best !== undefined);
    document.getElementById("parcoords-empty").hidden = runs.length > 0;
    parcoordsBox.hidden = !runs.length;
    if (!runs.length) return;
    const axes = data.params.map((name, dim) => {
      const values = runs.map((r) => r.params[name]);
      const numeric = values.every((v) => typeof v === "number");
      const axis = { dim, name };
      if (!numeric) Object.assign(axis, { type: "category", data: [...new Set(values.map(String))] });
      // Values over two decades or more (a learning rate) on a log axis, as the sweep draws them.
      else if (Math.min(...values) > 0 && Math.max(...values) / Math.min(...values) >= 100) axis.type = "log";
      return { axis, numeric };
    });
    const best = runs.map((r) => r.best);
    axes.push({ axis: { dim: axes.length, name: `best ${data.metric}` }, numeric: true });
    const lines = runs.map((r) => [...data.params.map((name, i) =>
      axes[i].numeric ? r.params[name] : String(r.params[name])), r.best]);
    const low = Math.min(...best), high = Math.max(...best);
    const goodLow = data.goal !== "maximize";
    if (!parcoords) parcoords = echarts.init(parcoordsBox, null, { renderer: "canvas" });
    parcoords.setOption({
      aria: { enabled: false },
      parallelAxis: axes.map((a) => a.axis),
      parallel: { left: 60, right: 90, top: 40, bottom: 30 },
      visualMap: {
        type: "continuous", dimension: axes.length - 1, min: low, max: high === low ? low + 1 : high,
        inRange: { color: goodLow ? ["#1a5fa8", "#d9d9d9"] : ["#d9d9d9", "#1a5fa8"] },
        calculable: true, right: 0, top: "middle", itemHeight: 160, text: ["high", "low"],
      },
      tooltip: { renderMode: "richText" },  // drawn on the canvas: the policy allows no inline styles in HTML
      series: [{ type: "parallel", lineStyle: { width: 2, opacity: 0.8 }, data: lines,
                 emphasis: { lineStyle: { width: 4 } } }],
    }, true);
    parcoordsBox.dataset.lines = String(lines.length);
  }

  function draw() {
    drawCurves();
    drawParcoords();
    root.dataset.drawn = String(data.runs.length);  // tests wait for this
  }

  async function load() {
    try {
      const response = await fetch(root.dataset.api, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) return;
      data = await response.json();
    } catch (err) {
      return;
    }
    draw();
    if (data.runs.some((r) => r.active)) setTimeout(load, 15000);
  }

  for (const control of [colorBy, logBox, smoothing]) {
    if (control) control.addEventListener("input", () => { if (data) drawCurves(); });
  }
  let resize = null;
  window.addEventListener("resize", () => {
    clearTimeout(resize);
    resize = setTimeout(() => { if (data) { drawCurves(); if (parcoords) parcoords.resize(); } }, 200);
  });
  root.querySelectorAll(".needs-js").forEach((el) => { el.hidden = false; });
  load();
})();
