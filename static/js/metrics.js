// Job page: each metric over steps as an interactive uPlot chart (vendored: static/vendor/uPlot.*), one line
// per trainer: values on hover (the legend), drag to zoom (double-click resets), a log scale, EMA smoothing
// (the raw values stay drawn faintly behind), other runs of the same name overlaid (dashed). The charts are
// linked: hovering one puts the cursor at the same step on all (uPlot's cursor sync), and a zoom or its reset
// on one applies to all. The x axis is the step, the wall time (the browser's zone) or the time since each run's
// first point (to compare runs that ran at different times). Read by cursor from /api/v1/jobs/<uid>/metrics while
// the job runs. Names are set with textContent only (never HTML); uPlot's legend sets its labels as text too.
(function () {
  const root = document.getElementById("metrics");
  if (!root || typeof uPlot === "undefined") return;
  // Dark enough for text on white (the caption's keys use the same colours: portal.css .metric-key-N).
  const COLORS = ["#1a5fa8", "#c0262d", "#1e7d32", "#a34c00", "#7b4ba8", "#8c564b", "#b0307f", "#0d6e7a"];
  const MAX_DRAWN = 1500; // points per line drawn; more are thinned evenly (the API keeps them all)
  const MAX_TRAINERS = 64; // more lines would not be readable
  const HEIGHT = 240;
  const series = new Map(); // metric name -> Map(line label -> {points: [[step, value, time]], color, dash, source})
  const charts = new Map(); // metric name -> {figure, plot, key, zoomed}
  const logScale = new Map(); // metric name -> the reader's choice
  const sources = [];
  let smoothing = 0;
  let xAxis = "step"; // "step", "wall" (epoch seconds) or "relative" (seconds since the run's first point)

  // A run whose trainers are read by cursor; the job's own run is active from the start.
  function addSource(api, trainers, prefix, active) {
    const source = { api, prefix, active, cursors: {}, complete: {}, start: Infinity };
    for (let i = 0; i < Math.min(trainers || 0, MAX_TRAINERS); i++) {
      source.cursors[`trainer-${i}`] = "";
      source.complete[`trainer-${i}`] = false;
    }
    sources.push(source);
    return source;
  }
  const own = addSource(root.dataset.api, parseInt(root.dataset.trainers, 10), "", true);

  function thin(points) {
    if (points.length <= MAX_DRAWN) return points;
    const every = points.length / MAX_DRAWN, out = [];
    for (let i = 0; i < MAX_DRAWN; i++) out.push(points[Math.floor(i * every)]);
    out.push(points[points.length - 1]);
    return out;
  }

  // Exponential moving average: 0 draws the values as logged, 0.99 nearly a flat trend.
  function smooth(ys) {
    if (!smoothing) return ys;
    let last = ys[0];
    return ys.map((y) => (last = smoothing * last + (1 - smoothing) * y));
  }

  // An axis or legend value: at most 4 significant digits and no trailing zeros (0.75, not 0.7500; 2, not
  // 2.000), or an exponent for very large or small values.
  function number(v) {
    if (v === null || v === undefined) return "–";
    const size = Math.abs(v);
    return size !== 0 && (size >= 1e5 || size < 1e-2) ? v.toExponential(2) : String(parseFloat(v.toPrecision(4)));
  }

  const SYNC = "job-metrics"; // uPlot's cursor sync key: every metric chart of the page moves together
  const RAW_ALPHA = "40"; // the raw line behind a smoothed one: its colour at 25% opacity

  function shownLines(name) {
    return [...series.get(name)].filter(([, line]) => line.source.active);
  }

  // A point's x on the chosen axis; null where a time axis has no time for it (a point logged without one).
  function xOf(point, line) {
    if (xAxis === "step") return point[0];
    if (point[2] === null || point[2] === undefined) return null;
    return xAxis === "wall" ? point[2] : point[2] - line.source.start;
  }

  // Each line's points; with smoothing, its raw values first (drawn faintly behind), then the smoothed ones.
  function plotData(lines) {
    const tables = lines.map(([, line]) => {
      const pts = thin(line.points.filter((p) => xOf(p, line) !== null)).sort((a, b) => xOf(a, line) - xOf(b, line));
      const xs = pts.map((p) => xOf(p, line)), raw = pts.map((p) => p[1]);
      return smoothing ? [xs, raw, smooth(raw)] : [xs, raw];
    });
    return uPlot.join(tables);
  }

  // Seconds as the relative axis reads them: 45 s, 3m 20s, 2h 05m.
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const s = Math.round(seconds), sign = s < 0 ? "-" : "", a = Math.abs(s);
    if (a < 60) return `${sign}${a} s`;
    if (a < 3600) return `${sign}${Math.floor(a / 60)}m ${String(a % 60).padStart(2, "0")}s`;
    return `${sign}${Math.floor(a / 3600)}h ${String(Math.floor((a % 3600) / 60)).padStart(2, "0")}m`;
  }

  // Wall times in the browser's zone: ticks as clock times (seconds where the chart spans under 10 minutes), the
  // day once in the axis's label, the cursor's time in full.
  function clock(seconds, withSeconds) {
    const options = { hour: "2-digit", minute: "2-digit", ...(withSeconds ? { second: "2-digit" } : {}) };
    return new Date(seconds * 1000).toLocaleTimeString([], options);
  }

  // Tick spacings a clock reads well (seconds): 10 s, 30 s, 1 min, 5 min, ... a day.
  const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

  function xAxisOptions(first) {
    if (xAxis === "relative") {
      return [{ time: false },
        { label: "time since the run's first point", values: (u, ticks) => ticks.map(duration), incrs: TIME_STEPS },
        { label: "since start", value: (u, v) => duration(v) }];
    }
    if (xAxis === "wall") {
      const day = first === null ? "" : ` (${new Date(first * 1000).toLocaleDateString()})`;
      const ticks = (u, values) => {
        const span = u.scales.x.max - u.scales.x.min;
        return values.map((v) => clock(v, span < 600));
      };
      return [{ time: false }, { label: `time${day}`, values: ticks, space: 90, incrs: TIME_STEPS },
        { label: "time", value: (u, v) => (v === null || v === undefined ? "–" : new Date(v * 1000).toLocaleString()) }];
    }
    return [{ time: false }, { label: "step" }, { label: "step" }];
  }

  function options(name, lines, log, width, state) {
    const value = (u, v) => number(v);
    const drawn = lines.flatMap(([label, line]) => [
      ...(smoothing ? [{ label: `${label} raw`, stroke: line.color + RAW_ALPHA, width: 1, dash: line.dash, spanGaps: true, value, raw: true }] : []),
      { label, stroke: line.color, width: 1.5, dash: line.dash, spanGaps: true, value },
    ]);
    const firsts = lines.map(([, line]) => line.source.start).filter(Number.isFinite);
    const [xScale, xAxisDrawn, xSeries] = xAxisOptions(firsts.length ? Math.min(...firsts) : null);
    return {
      width, height: HEIGHT,
      scales: { x: xScale, y: log ? { distr: 3, log: 10 } : {} },
      axes: [xAxisDrawn, { size: 64, values: (u, ticks) => ticks.map(number) }],
      series: [xSeries, ...drawn],
      cursor: { drag: { x: true, y: false }, sync: { key: SYNC, setSeries: false } },
      hooks: {
        // A zoom on one chart is a zoom on all: the same steps (or times).
        setSelect: [(u) => {
          if (u.select.width <= 0) return;
          const min = u.posToVal(u.select.left, "x"), max = u.posToVal(u.select.left + u.select.width, "x");
          for (const other of charts.values()) {
            other.zoomed = true;
            if (other.plot && other.plot !== u) other.plot.setScale("x", { min, max });
          }
        }],
        ready: [(u) => {
          // The raw lines are the smoothed ones' shadows: not listed in the legend.
          const rows = u.root.querySelectorAll(".u-legend .u-series");
          u.series.forEach((s, i) => { if (s.raw && rows[i]) rows[i].style.display = "none"; });
          u.over.addEventListener("dblclick", () => {
            for (const other of charts.values()) {
              other.zoomed = false;
              if (other.plot && other.plot !== u) other.plot.setData(other.plot.data, true);
            }
          });
        }],
      },
    };
  }

  function caption(name, lines, canLog, log) {
    const box = document.createElement("figcaption");
    const title = document.createElement("strong");
    title.className = "metric-name";
    title.textContent = name;
    box.appendChild(title);
    for (const [label, line] of lines) {
      if (line.source !== own) continue;
      const key = document.createElement("span");
      key.className = `metric-key metric-key-${COLORS.indexOf(line.color)}`;
      key.textContent = ` ${label}: ${number(line.points[line.points.length - 1][1])}`;
      box.appendChild(key);
    }
    if (canLog) {
      const toggle = document.createElement("label");
      toggle.className = "metric-scale";
      const check = document.createElement("input");
      check.type = "checkbox";
      check.checked = log;
      check.dataset.metric = name;
      check.addEventListener("change", () => { logScale.set(name, check.checked); charts.get(name).key = ""; render(); });
      toggle.append(" ", check, " log scale");
      box.appendChild(toggle);
    }
    return box;
  }

  // Draw one metric: a new uPlot when its lines or scale changed, else new data into the old one (a zoom stays).
  function draw(name, place) {
    const lines = shownLines(name);
    const canLog = lines.every(([, line]) => line.points.every((p) => p[1] > 0));
    const log = canLog && logScale.get(name) === true;
    const key = JSON.stringify([lines.map(([label]) => label), log, smoothing > 0, xAxis]);
    let state = charts.get(name);
    if (!state) { state = { figure: document.createElement("figure"), key: "", zoomed: false }; charts.set(name, state); }
    const figure = state.figure;
    figure.className = "metric";
    figure.dataset.metric = name;
    figure.dataset.scale = log ? "log" : "linear";
    figure.dataset.xAxis = xAxis;
    for (const [label, line] of lines) if (line.source === own) figure.setAttribute(`data-points-${label}`, line.points.length);
    const data = plotData(lines);
    if (state.key !== key || !state.plot) {
      if (state.plot) state.plot.destroy();
      figure.replaceChildren(caption(name, lines, canLog, log));
      state.zoomed = false;
      state.plot = new uPlot(options(name, lines, log, chartWidth(), state), data, figure);
      state.key = key;
    } else {
      figure.replaceChild(caption(name, lines, canLog, log), figure.firstChild);
      state.plot.setData(data, !state.zoomed);
    }
    place.appendChild(figure);
  }

  function chartWidth() {
    return Math.max(200, Math.min(document.getElementById("metrics-charts").clientWidth || 640, 900));
  }

  function render() {
    const box = document.getElementById("metrics-charts");
    document.getElementById("metrics-empty").hidden = series.size > 0;
    document.getElementById("metrics-controls").hidden = series.size === 0;
    for (const name of [...series.keys()].sort()) draw(name, box);
  }

  new ResizeObserver(() => {
    for (const state of charts.values()) if (state.plot) state.plot.setSize({ width: chartWidth(), height: HEIGHT });
  }).observe(document.getElementById("metrics-charts"));

  const slider = document.getElementById("metrics-smoothing");
  slider.addEventListener("input", () => {
    smoothing = Math.min(Math.max(parseFloat(slider.value) || 0, 0), 0.99);
    document.getElementById("metrics-smoothing-value").textContent = smoothing.toFixed(2);
    render();
  });

  const xChoice = document.getElementById("metrics-x");
  if (xChoice) {
    xChoice.addEventListener("change", () => {
      xAxis = ["step", "wall", "relative"].includes(xChoice.value) ? xChoice.value : "step";
      render(); // each chart is made again on the new axis (its zoom, in the old one's units, is dropped)
    });
  }

  for (const check of document.querySelectorAll(".metric-runs input[type=checkbox]")) {
    let source = null;
    check.addEventListener("change", () => {
      if (!source) source = addSource(check.dataset.api, parseInt(check.dataset.trainers, 10), `${check.dataset.uid} `, true);
      source.active = check.checked;
      dirty = true; // its lines appear (from what was read before, or the next read) or go
      if (check.checked) poll(); else render();
    });
  }

  function addPoints(source, worker, points) {
    const label = source.prefix + worker;
    // Another run's trainer N takes a colour a few places on from this run's (and is dashed).
    const index = (parseInt(worker.split("-")[1], 10) || 0) + 3 * sources.indexOf(source);
    for (const p of points) {
      if (typeof p.time === "number" && p.time < source.start) source.start = p.time;
      for (const [name, value] of Object.entries(p.values)) {
        if (!series.has(name)) series.set(name, new Map());
        const lines = series.get(name);
        if (!lines.has(label)) {
          lines.set(label, { points: [], color: COLORS[index % COLORS.length], dash: source === own ? undefined : [6, 4], source });
        }
        lines.get(label).points.push([p.step, value, typeof p.time === "number" ? p.time : null]);
      }
    }
  }

  // One read may take at most FETCH_MS: a request the network or the portal never answers is given up
  // and asked again next round (the cursor only moves with an answer read whole: nothing lost or repeated).
  const FETCH_MS = 10000, POLL_MS = 2000;
  let dirty = false; // points arrived that are not drawn yet
  let timer = null, reading = false;

  async function readWorker(source, worker) {
    for (let page = 0; page < 50; page++) { // drain what is there (each answer is at most 256 KiB)
      const url = `${source.api}?worker=${encodeURIComponent(worker)}&cursor=${encodeURIComponent(source.cursors[worker])}`;
      const response = await fetch(url, { credentials: "same-origin", signal: AbortSignal.timeout(FETCH_MS) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const data = await response.json();
      addPoints(source, worker, data.points);
      const moved = data.cursor !== source.cursors[worker];
      source.cursors[worker] = data.cursor;
      source.complete[worker] = data.complete;
      if (data.points.length) { dirty = true; root.dataset.updated = String(Date.now()); }
      if (!moved || data.complete) return;
    }
  }

  const unfinished = (source) => source.active && !Object.values(source.complete).every(Boolean);

  // Every round reads each unfinished trainer of each shown run; whatever fails (a timeout, a restarting
  // portal, a drawing error) is noted on the section (data-failures, data-error) and the next round is
  // still scheduled. A run checked later starts the rounds again if they had stopped.
  async function poll() {
    if (reading) return;
    reading = true;
    clearTimeout(timer);
    try {
      for (const source of sources.filter(unfinished)) {
        for (const worker of Object.keys(source.cursors)) {
          if (source.complete[worker]) continue;
          try {
            await readWorker(source, worker);
          } catch (e) {
            root.dataset.failures = String((parseInt(root.dataset.failures, 10) || 0) + 1);
            root.dataset.error = `${worker}: ${e}`.slice(0, 200);
          }
        }
      }
      if (dirty) { dirty = false; render(); }
    } catch (e) {
      root.dataset.error = `render: ${e}`.slice(0, 200);
    } finally {
      reading = false;
      root.dataset.polled = String(Date.now());
      if (!unfinished(own)) root.dataset.complete = "true";
      if (sources.some(unfinished)) timer = setTimeout(poll, POLL_MS);
    }
  }

  poll();
})();
