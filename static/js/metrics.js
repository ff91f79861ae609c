// Job page: each metric over steps as an SVG chart, one line per trainer, read by cursor from
// /api/v1/jobs/<uid>/metrics while the job runs. Names are set with textContent only (never HTML).
(function () {
  const root = document.getElementById("metrics");
  if (!root) return;
  const api = root.dataset.api;
  const trainers = Math.min(parseInt(root.dataset.trainers, 10) || 0, 64); // more would not be readable
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  const MAX_DRAWN = 1500; // points per line drawn; more are thinned evenly (the API keeps them all)
  const W = 640, H = 240, PAD = { left: 56, right: 12, top: 12, bottom: 28 };
  const NS = "http://www.w3.org/2000/svg";
  const series = new Map(); // metric name -> Map(worker -> [[step, value], ...])
  const cursors = {}, complete = {};
  for (let i = 0; i < trainers; i++) { cursors[`trainer-${i}`] = ""; complete[`trainer-${i}`] = false; }

  function el(name, attrs, text) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function thin(points) {
    if (points.length <= MAX_DRAWN) return points;
    const every = points.length / MAX_DRAWN, out = [];
    for (let i = 0; i < MAX_DRAWN; i++) out.push(points[Math.floor(i * every)]);
    out.push(points[points.length - 1]);
    return out;
  }

  // A metric whose values are all positive and span two orders of magnitude or more may be drawn on
  // a log scale (a checkbox by its name); linear is the default, and the choice is kept per metric.
  const LOG_SPAN = 100;
  const logScale = new Map();

  function range(lines) {
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const pts of lines.values()) for (const [x, y] of pts) {
      x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
    return { x0, x1, y0, y1 };
  }

  // An axis label that fits left of the chart: 4 digits, or an exponent for very large or small values.
  function axis(v) {
    const size = Math.abs(v);
    return size !== 0 && (size >= 1e5 || size < 1e-2) ? v.toExponential(2) : v.toPrecision(4);
  }

  function spansDecades(lines) {
    const { y0, y1 } = range(lines);
    return y0 > 0 && y1 / y0 >= LOG_SPAN;
  }

  function chart(name, lines, log) {
    let { x0, x1, y0, y1 } = range(lines);
    const f = log ? Math.log10 : (y) => y;
    const shown = log ? (y) => Math.pow(10, y) : (y) => y;
    y0 = f(y0); y1 = f(y1);
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y1 = y0 + 1; y0 -= 1; }
    const sx = (x) => PAD.left + ((x - x0) / (x1 - x0)) * (W - PAD.left - PAD.right);
    const sy = (y) => H - PAD.bottom - ((f(y) - y0) / (y1 - y0)) * (H - PAD.top - PAD.bottom);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "metric-chart", role: "img", "data-metric": name,
      "data-scale": log ? "log" : "linear" });
    svg.appendChild(el("title", {}, name));
    svg.appendChild(el("rect", { x: PAD.left, y: PAD.top, width: W - PAD.left - PAD.right,
      height: H - PAD.top - PAD.bottom, fill: "none", stroke: "#ccc" }));
    const label = (x, y, text, anchor) => svg.appendChild(
      el("text", { x, y, "font-size": 11, fill: "#555", "text-anchor": anchor }, text));
    label(PAD.left - 4, PAD.top + 10, axis(shown(y1)), "end");
    label(PAD.left - 4, H - PAD.bottom, axis(shown(y0)), "end");
    if (log) label(PAD.left - 4, (PAD.top + H - PAD.bottom) / 2, axis(shown((y0 + y1) / 2)), "end");
    label(PAD.left, H - 8, String(x0), "start");
    label(W - PAD.right, H - 8, `step ${x1}`, "end");
    let i = 0;
    for (const [worker, pts] of lines) {
      const color = COLORS[parseInt(worker.split("-")[1], 10) % COLORS.length] || COLORS[i % COLORS.length];
      const d = thin(pts).map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" ");
      svg.appendChild(el("polyline", { points: d, fill: "none", stroke: color, "stroke-width": 1.5,
        "data-worker": worker, "data-points": pts.length }));
      i += 1;
    }
    return svg;
  }

  function render() {
    const box = document.getElementById("metrics-charts");
    document.getElementById("metrics-empty").hidden = series.size > 0;
    box.replaceChildren();
    for (const name of [...series.keys()].sort()) {
      const lines = series.get(name);
      const figure = document.createElement("figure");
      figure.className = "metric";
      const caption = document.createElement("figcaption");
      const title = document.createElement("strong");
      title.className = "metric-name";
      title.textContent = name;
      caption.appendChild(title);
      for (const [worker, pts] of lines) {
        const key = document.createElement("span");
        key.className = `metric-key metric-key-${parseInt(worker.split("-")[1], 10) % COLORS.length}`;
        key.textContent = ` ${worker}: ${pts[pts.length - 1][1].toPrecision(4)}`;
        caption.appendChild(key);
      }
      const log = spansDecades(lines) && logScale.get(name) === true;
      if (spansDecades(lines)) {
        const toggle = document.createElement("label");
        toggle.className = "metric-scale";
        const box = document.createElement("input");
        box.type = "checkbox";
        box.checked = log;
        box.dataset.metric = name;
        box.addEventListener("change", () => { logScale.set(name, box.checked); render(); });
        toggle.append(" ", box, " log scale");
        caption.appendChild(toggle);
      }
      figure.appendChild(caption);
      figure.appendChild(chart(name, lines, log));
      box.appendChild(figure);
    }
  }

  // One read may take at most FETCH_MS: a request the network or the portal never answers is given up
  // and asked again next round (the cursor only moves with an answer read whole: nothing lost or repeated).
  const FETCH_MS = 10000, POLL_MS = 2000;
  let dirty = false; // points arrived that are not drawn yet

  async function readWorker(worker) {
    for (let page = 0; page < 50; page++) { // drain what is there (each answer is at most 256 KiB)
      const url = `${api}?worker=${encodeURIComponent(worker)}&cursor=${encodeURIComponent(cursors[worker])}`;
      const response = await fetch(url, { credentials: "same-origin", signal: AbortSignal.timeout(FETCH_MS) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const data = await response.json();
      for (const p of data.points) {
        for (const [name, value] of Object.entries(p.values)) {
          if (!series.has(name)) series.set(name, new Map());
          const lines = series.get(name);
          if (!lines.has(worker)) lines.set(worker, []);
          lines.get(worker).push([p.step, value]);
        }
      }
      const moved = data.cursor !== cursors[worker];
      cursors[worker] = data.cursor;
      complete[worker] = data.complete;
      if (data.points.length) { dirty = true; root.dataset.updated = String(Date.now()); }
      if (!moved || data.complete) return;
    }
  }

  // Every round reads each unfinished trainer; whatever fails (a timeout, a restarting portal, a drawing
  // error) is noted on the section (data-failures, data-error) and the next round is still scheduled.
  async function poll() {
    try {
      for (const worker of Object.keys(cursors)) {
        if (complete[worker]) continue;
        try {
          await readWorker(worker);
        } catch (e) {
          root.dataset.failures = String((parseInt(root.dataset.failures, 10) || 0) + 1);
          root.dataset.error = `${worker}: ${e}`.slice(0, 200);
        }
      }
      if (dirty) { dirty = false; render(); }
    } catch (e) {
      root.dataset.error = `render: ${e}`.slice(0, 200);
    } finally {
      root.dataset.polled = String(Date.now());
      if (Object.values(complete).every(Boolean)) root.dataset.complete = "true";
      else setTimeout(poll, POLL_MS);
    }
  }

  poll();
})();
