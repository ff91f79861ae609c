// Log viewer: one worker or all of them, followed by cursor (the API's cursor is the truth: a dropped
// connection resumes where it stopped, never losing or repeating a line). Opens at the end (`tail`),
// loads older text on demand, and lets a `\r` progress update replace the line it belongs to.
(function () {
  const viewer = document.getElementById("log-viewer");
  if (!viewer) return;
  const pane = document.getElementById("log");
  const select = document.getElementById("log-worker");
  const followButton = document.getElementById("log-follow");
  const olderButton = document.getElementById("log-older");
  const search = document.getElementById("log-search");
  const matches = document.getElementById("log-matches");
  const download = document.getElementById("log-download");
  const statusText = document.getElementById("log-status");
  const api = viewer.dataset.api;
  const TAIL_ONE = 1000, TAIL_EACH = 200, OLDER_BYTES = 256 * 1024, TICK_MS = 500;
  const encoder = new TextEncoder(), decoder = new TextDecoder();

  let generation = 0, following = true, streams = {}, lines = [], nodes = [], timer = null;

  function bytes(text) { return encoder.encode(text).length; }

  function setStatus(text) { statusText.textContent = text; }

  // --- the lines model -------------------------------------------------------------------------
  function stream(worker, prefix) {
    return { worker, prefix, cursor: "", start: 0, open: -1, openText: "", cr: false, complete: false, busy: false };
  }

  function show(index) {
    const text = lines[index] + "\n";
    if (nodes[index]) { nodes[index].nodeValue = text; return; }
    nodes[index] = document.createTextNode(text);
    if (!search.value) pane.appendChild(nodes[index]);
  }

  // Text after the cursor of `st`: whole lines, or a line cut after a `\r` (a progress update).
  function ingest(st, text) {
    const pieces = text.split("\n");
    pieces.forEach((piece, i) => {
      const terminated = i < pieces.length - 1;
      if (!terminated && piece === "") return;
      let current = st.openText, cr = st.cr;
      piece.split("\r").forEach((segment, j) => {
        if (j > 0) cr = true;
        if (segment !== "") { current = cr ? segment : current + segment; cr = false; }
      });
      if (st.open < 0) { lines.push(""); st.open = lines.length - 1; }
      lines[st.open] = st.prefix + current;
      show(st.open);
      if (terminated) { st.open = -1; st.openText = ""; st.cr = false; } else { st.openText = current; st.cr = cr; }
    });
  }

  function render() {
    const term = search.value.toLowerCase();
    pane.textContent = "";
    if (!term) {
      nodes.forEach((node) => pane.appendChild(node));
      matches.textContent = "";
      return;
    }
    let found = 0;
    const shown = document.createDocumentFragment();
    lines.forEach((line) => {
      if (line.toLowerCase().includes(term)) { found += 1; shown.appendChild(document.createTextNode(line + "\n")); }
    });
    pane.appendChild(shown);
    matches.textContent = `${found} matching line${found === 1 ? "" : "s"} of ${lines.length} loaded`;
  }

  function atBottom() { return pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 8; }
  function toEnd() { pane.scrollTop = pane.scrollHeight; }

  // --- fetching ----------------------------------------------------------------------------------
  async function fetchLog(worker, params) {
    const query = new URLSearchParams({ worker, ...params });
    const response = await fetch(`${api}?${query}`, { credentials: "same-origin", headers: { Accept: "application/json" } });
    const data = await response.json();
    if (!response.ok) throw new Error(data.detail || `HTTP ${response.status}`);
    return data;
  }

  async function open(st, gen, tail) {
    const data = await fetchLog(st.worker, { tail: String(tail) });
    if (gen !== generation) return;
    st.start = Math.max(0, Number(data.cursor) - bytes(data.text));
    st.cursor = data.cursor;
    st.complete = data.complete;
    ingest(st, data.text);
  }

  async function follow(st, gen) {
    if (st.busy || st.complete) return;
    st.busy = true;
    try {
      const data = await fetchLog(st.worker, { cursor: st.cursor });
      if (gen !== generation) return;
      const stick = atBottom();
      if (data.text) ingest(st, data.text);
      st.cursor = data.cursor;
      st.complete = data.complete;
      if (data.text && search.value) render();
      if (stick && following) toEnd();
    } finally {
      st.busy = false;
    }
  }

  async function tick(gen) {
    if (gen !== generation || !following) return;
    const all = Object.values(streams);
    try {
      await Promise.all(all.map((st) => follow(st, gen)));
      if (gen !== generation) return;
      if (all.every((st) => st.complete)) { setStatus("complete: the whole log is shown"); return; }
      setStatus("following");
    } catch (error) {
      setStatus(`retrying: ${error.message}`);  // the cursor is kept: nothing is lost or repeated
    }
    timer = setTimeout(() => tick(gen), TICK_MS);
  }

  // Older text of the one followed worker: the bytes before `start`, cut at a line start.
  async function loadOlder() {
    const st = Object.values(streams)[0];
    if (!st || Object.keys(streams).length !== 1 || st.start <= 0) return;
    const gen = generation;
    const from = Math.max(0, st.start - OLDER_BYTES);
    olderButton.disabled = true;
    try {
      const data = await fetchLog(st.worker, { cursor: String(from) });
      if (gen !== generation) return;
      let raw = encoder.encode(data.text).subarray(0, st.start - from);
      let begin = from;
      if (from > 0) {
        const newline = raw.indexOf(10);
        if (newline >= 0 && newline + 1 < raw.length) { raw = raw.subarray(newline + 1); begin = from + newline + 1; }
      }
      const older = decoder.decode(raw).replace(/\n$/, "").split("\n").map((line) => {
        const parts = line.split("\r").filter((part) => part !== "");
        return st.prefix + (parts.length ? parts[parts.length - 1] : "");
      });
      const before = pane.scrollHeight;
      lines = older.concat(lines);
      const added = older.map((line) => document.createTextNode(line + "\n"));
      nodes = added.concat(nodes);
      if (st.open >= 0) st.open += older.length;
      st.start = begin;
      render();
      pane.scrollTop += pane.scrollHeight - before;  // keep the reader's place
    } catch (error) {
      setStatus(`could not load older text: ${error.message}`);
    } finally {
      olderButton.disabled = st.start <= 0;
    }
  }

  async function choose(choice) {
    generation += 1;
    const gen = generation;
    clearTimeout(timer);
    lines = []; nodes = []; pane.textContent = ""; streams = {};
    const names = choice === "*" ? Array.from(select.options).map((o) => o.value).filter((v) => v !== "*") : [choice];
    names.forEach((name) => { streams[name] = stream(name, choice === "*" ? `[${name}] ` : ""); });
    download.href = `${viewer.dataset.base}${encodeURIComponent(names[0])}/download`;
    download.hidden = choice === "*";
    setStatus("loading the end of the log…");
    try {
      await Promise.all(Object.values(streams).map((st) => open(st, gen, choice === "*" ? TAIL_EACH : TAIL_ONE)));
    } catch (error) {
      if (gen === generation) setStatus(`retrying: ${error.message}`);
    }
    if (gen !== generation) return;
    olderButton.hidden = choice === "*";
    olderButton.disabled = Object.values(streams).every((st) => st.start <= 0);
    render();
    toEnd();
    tick(gen);
  }

  followButton.addEventListener("click", () => {
    following = !following;
    followButton.textContent = following ? "Pause" : "Follow";
    followButton.classList.toggle("secondary", !following);
    if (following) { toEnd(); tick(generation); } else { clearTimeout(timer); setStatus("paused"); }
  });
  document.getElementById("log-end").addEventListener("click", toEnd);
  olderButton.addEventListener("click", loadOlder);
  search.addEventListener("input", () => { render(); if (!search.value) toEnd(); });
  select.addEventListener("change", () => choose(select.value));
  choose(select.value);
})();
