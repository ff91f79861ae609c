// Log viewer: one worker or all of them, followed by cursor (the API's cursor is the truth: a dropped
// connection resumes where it stopped, never losing or repeating a line). Opens at the end (`tail`),
// loads older text on demand, and lets a `\r` progress update replace the line it belongs to.
// Each line shows when it arrived (the API's `times`, kept by the launcher): local time, the full ISO
// time on hover, hidden with the Times toggle. "All workers" interleaves the workers' lines by time.
// "Search whole log" asks the server (/logs/search) for the chosen worker's matching lines, the matches
// marked; choosing one opens the log at that line (paused; Load older and Follow go on from there).
(function () {
  const viewer = document.getElementById("log-viewer");
  if (!viewer) return;
  const pane = document.getElementById("log");
  const select = document.getElementById("log-worker");
  const followButton = document.getElementById("log-follow");
  const olderButton = document.getElementById("log-older");
  const timesBox = document.getElementById("log-times");
  const search = document.getElementById("log-search");
  const matches = document.getElementById("log-matches");
  const download = document.getElementById("log-download");
  const statusText = document.getElementById("log-status");
  const api = viewer.dataset.api;
  const searchApi = viewer.dataset.searchApi;
  const searchAllButton = document.getElementById("log-search-all");
  const results = document.getElementById("log-results");
  const resultsList = document.getElementById("log-results-list");
  const resultsSummary = document.getElementById("log-results-summary");
  const resultsMore = document.getElementById("log-results-more");
  const TAIL_ONE = 1000, TAIL_EACH = 200, OLDER_BYTES = 256 * 1024, OLDER_EACH_MIN = 64 * 1024, TICK_MS = 500,
    FETCH_MS = 10000, PAUSED_CHECK_MS = 2000;
  const TIMES_KEY = "paddlecloud.logTimes";
  // The times are the browser's zone, like every time on the page (static/js/portal.js): the toggle names it.
  if (timesBox && window.paddlecloudTimes) timesBox.parentElement.append(` (${window.paddlecloudTimes.zone(new Date())})`);
  // The worker chosen on this job's page, kept for this tab: a kill or delete reloads the page.
  const CHOICE_KEY = `paddlecloud.logWorker:${api}`;
  const encoder = new TextEncoder(), decoder = new TextDecoder();

  // `lines` stays sorted by (key, seq): key is the line's time (kept ascending within a worker), seq
  // the order lines came in (new ones count up, older ones loaded on demand count down).
  let generation = 0, following = true, streams = {}, lines = [], timer = null, pausedTimer = null, newest = 0, oldest = 0;

  function bytes(text) { return encoder.encode(text).length; }
  function setStatus(text) { statusText.textContent = text; }
  function pad(n, width) { return String(n).padStart(width || 2, "0"); }

  function clock(time) {
    const d = new Date(time * 1000), now = new Date();
    const day = d.toDateString() === now.toDateString() ? "" : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} `;
    return `${day}${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }

  // --- the lines model -------------------------------------------------------------------------
  function stream(worker, prefix) {
    return { worker, prefix, cursor: "", start: 0, open: null, openText: "", cr: false, complete: false, busy: false,
      firstKey: null, lastKey: null };
  }

  function element(line) {
    const el = document.createElement("span");
    el.className = "line";
    el.dataset.worker = line.st.worker;
    const stamp = document.createElement("span");
    stamp.className = "ts";
    if (line.time !== null && line.time !== undefined) {
      el.dataset.time = String(line.time);
      stamp.textContent = clock(line.time) + " ";
      const at = new Date(line.time * 1000);
      el.title = window.paddlecloudTimes ? window.paddlecloudTimes.full(at) : at.toISOString();
    } else {
      stamp.textContent = " ".repeat(13);
    }
    el.appendChild(stamp);
    if (line.st.prefix) {
      const who = document.createElement("span");
      who.className = "who";
      who.textContent = line.st.prefix;
      el.appendChild(who);
    }
    el.appendChild(document.createTextNode(""));
    return el;
  }

  function setText(line, text) {
    line.text = text;
    line.el.lastChild.nodeValue = text + "\n";
  }

  function before(a, b) { return a.key < b.key || (a.key === b.key && a.seq < b.seq); }

  // Where `line` goes in `lines`: after every line that sorts before it (new lines: nearly always the end).
  function place(line) {
    let low = 0, high = lines.length;
    if (!high || before(lines[high - 1], line)) low = high;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (before(lines[middle], line)) low = middle + 1; else high = middle;
    }
    const next = lines[low];
    lines.splice(low, 0, line);
    if (!search.value) pane.insertBefore(line.el, next ? next.el : null);
  }

  function lastKey() { return lines.length ? lines[lines.length - 1].key : 0; }

  // A new line of `st` that arrived at `time` (null: unknown, it then sorts as arriving now).
  function addLine(st, time) {
    let key = time !== null && time !== undefined ? time : (st.lastKey !== null ? st.lastKey : lastKey());
    if (st.lastKey !== null) key = Math.max(key, st.lastKey);
    st.lastKey = key;
    if (st.firstKey === null) st.firstKey = key;
    const line = { st, time, key, seq: ++newest, text: "" };
    line.el = element(line);
    place(line);
    return line;
  }

  // Text after the cursor of `st`: whole lines, or a line cut after a `\r` (a progress update).
  // times[i] is when the i-th piece between newlines began; a piece that continues the open line keeps its time.
  function ingest(st, text, times) {
    const pieces = text.split("\n");
    pieces.forEach((piece, i) => {
      const terminated = i < pieces.length - 1;
      if (!terminated && piece === "") return;
      let current = st.openText, cr = st.cr;
      piece.split("\r").forEach((segment, j) => {
        if (j > 0) cr = true;
        if (segment !== "") { current = cr ? segment : current + segment; cr = false; }
      });
      if (!st.open) st.open = addLine(st, times ? times[i] : null);
      setText(st.open, current);
      if (terminated) { st.open = null; st.openText = ""; st.cr = false; } else { st.openText = current; st.cr = cr; }
    });
  }

  // Older whole lines of `st` (oldest first) with their times: placed before what it has, by time among the others.
  function ingestOlder(st, texts, times) {
    for (let i = texts.length - 1; i >= 0; i--) {
      const time = times[i];
      let key = time !== null && time !== undefined ? time : st.firstKey;
      if (key === null) key = 0;
      if (st.firstKey !== null) key = Math.min(key, st.firstKey);
      st.firstKey = key;
      if (st.lastKey === null) st.lastKey = key;
      const line = { st, time, key, seq: --oldest, text: "" };
      line.el = element(line);
      setText(line, texts[i]);
      place(line);
    }
  }

  function render() {
    const term = search.value.toLowerCase();
    pane.textContent = "";
    const shown = document.createDocumentFragment();
    let found = 0;
    lines.forEach((line) => {
      if (!term || (line.st.prefix + line.text).toLowerCase().includes(term)) { found += 1; shown.appendChild(line.el); }
    });
    pane.appendChild(shown);
    matches.textContent = term ? `${found} matching line${found === 1 ? "" : "s"} of ${lines.length} loaded` : "";
  }

  function atBottom() { return pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 8; }
  function toEnd() { pane.scrollTop = pane.scrollHeight; }

  // --- fetching ----------------------------------------------------------------------------------
  async function fetchLog(worker, params) {
    const query = new URLSearchParams({ worker, ...params });
    // A request never answered would stall the follow loop for good: give it up after FETCH_MS (retried).
    const response = await fetch(`${api}?${query}`, { credentials: "same-origin", headers: { Accept: "application/json" },
      signal: AbortSignal.timeout(FETCH_MS) });
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
    ingest(st, data.text, data.times);
  }

  async function follow(st, gen) {
    if (st.busy || st.complete) return;
    st.busy = true;
    try {
      const data = await fetchLog(st.worker, { cursor: st.cursor });
      if (gen !== generation) return;
      const stick = atBottom();
      if (data.text) ingest(st, data.text, data.times);
      st.cursor = data.cursor;
      st.complete = data.complete;
      if (data.text && search.value) render();
      if (stick && following) toEnd();
    } finally {
      st.busy = false;
    }
  }

  // Paused: nothing is added, but once the job's logs are final the rest is loaded below the reader's
  // place (kept) and the controls switch to "ended": a finished job offers no Follow. Each check reads
  // only what came since the last one (`peek`, the end seen), so a long pause costs no more than following.
  async function watchPaused(gen) {
    if (gen !== generation || following) return;
    const all = Object.values(streams);
    try {
      const ends = await Promise.all(all.map((st) => fetchLog(st.worker, { cursor: st.peek || st.cursor, tail: "0" })));
      if (gen !== generation || following) return;
      ends.forEach((data, i) => { all[i].peek = data.cursor; });
      if (ends.every((data) => data.complete)) {
        await Promise.all(all.map((st) => follow(st, gen)));
        if (gen !== generation || following) return;
        if (all.every((st) => st.complete)) { ended(all); return; }
      }
    } catch (error) { /* checked again on the next round */ }
    if (gen === generation && !following) pausedTimer = setTimeout(() => watchPaused(gen), PAUSED_CHECK_MS);
  }

  async function tick(gen) {
    if (gen !== generation || !following) return;
    const all = Object.values(streams);
    try {
      await Promise.all(all.map((st) => follow(st, gen)));
      if (gen !== generation) return;
      if (all.every((st) => st.complete)) { ended(all); return; }
      setStatus(`following: ${loaded(all)}`);
    } catch (error) {
      setStatus(`retrying: ${error.message}`);  // the cursor is kept: nothing is lost or repeated
    }
    timer = setTimeout(() => tick(gen), TICK_MS);
  }

  function size(n) {
    const units = ["bytes", "KiB", "MiB", "GiB"];  // binary, like every size the portal shows
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return i ? `${n.toFixed(n < 10 ? 1 : 0)} ${units[i]}` : `${n} bytes`;
  }

  // How much of the log is in the pane: the viewer opens with the tail only, so "shown" must not mean "all".
  function loaded(all) {
    const total = all.reduce((sum, st) => sum + Number(st.cursor), 0);
    const have = all.reduce((sum, st) => sum + Number(st.cursor) - st.start, 0);
    return have >= total ? "the whole log is shown"
      : `the last ${size(have)} of ${size(total)} is shown ("Load older" for more)`;
  }

  // Nothing more will be written: no following any more.
  function ended(all) {
    followButton.hidden = true;
    setStatus(`ended: ${loaded(all)}`);
  }

  // The bytes of `st` before its `start`, cut at a line start, as lines with their times.
  async function older(st, gen, size) {
    const from = Math.max(0, st.start - size);
    const data = await fetchLog(st.worker, { cursor: String(from) });
    if (gen !== generation) return;
    let raw = encoder.encode(data.text).subarray(0, st.start - from);
    let begin = from, skipped = 0;
    if (from > 0) {
      const newline = raw.indexOf(10);
      if (newline >= 0 && newline + 1 < raw.length) {
        raw = raw.subarray(newline + 1); begin = from + newline + 1; skipped = 1;
      }
    }
    const texts = decoder.decode(raw).replace(/\n$/, "").split("\n").map((line) => {
      const parts = line.split("\r").filter((part) => part !== "");
      return parts.length ? parts[parts.length - 1] : "";
    });
    const times = texts.map((_, i) => (data.times ? data.times[i + skipped] : null));
    st.start = begin;
    ingestOlder(st, texts, times);
  }

  async function loadOlder() {
    const wanting = Object.values(streams).filter((st) => st.start > 0);
    if (!wanting.length) return;
    const gen = generation;
    const size = Math.max(OLDER_EACH_MIN, Math.floor(OLDER_BYTES / wanting.length));
    olderButton.disabled = true;
    const height = pane.scrollHeight;
    try {
      await Promise.all(wanting.map((st) => older(st, gen, size)));
      if (gen !== generation) return;
      if (search.value) render();
      pane.scrollTop += pane.scrollHeight - height;  // keep the reader's place
      const all = Object.values(streams);
      if (all.every((st) => st.complete)) ended(all);
    } catch (error) {
      setStatus(`could not load older text: ${error.message}`);
    } finally {
      olderButton.disabled = Object.values(streams).every((st) => st.start <= 0);
    }
  }

  // --- searching the whole log on the server ----------------------------------------------------
  let searched = { worker: "", term: "", next: null, found: 0 };

  function marked(text, term) {  // text nodes, each case-insensitive occurrence of `term` in a <mark>
    const out = [], lower = text.toLowerCase(), wanted = term.toLowerCase();
    let at = 0;
    for (let hit = lower.indexOf(wanted); wanted && hit >= 0; hit = lower.indexOf(wanted, hit + wanted.length)) {
      out.push(document.createTextNode(text.slice(at, hit)));
      const mark = document.createElement("mark");
      mark.textContent = text.slice(hit, hit + wanted.length);
      out.push(mark);
      at = hit + wanted.length;
    }
    out.push(document.createTextNode(text.slice(at)));
    return out;
  }

  function result(match) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "link";
    button.dataset.offset = String(match.offset);
    const where = document.createElement("span");
    where.className = "muted";
    where.textContent = `at ${size(match.offset)}: `;
    button.append(where, ...marked(match.line, searched.term));
    button.addEventListener("click", () => openAt(searched.worker, match.offset));
    item.append(button);
    return item;
  }

  async function searchWhole(more) {
    results.hidden = false;
    if (!more) {
      if (select.value === "*") { resultsSummary.textContent = "Choose one worker to search its whole log."; return; }
      if (!search.value.trim()) { resultsSummary.textContent = "Type what to look for in the search box first."; return; }
      searched = { worker: select.value, term: search.value.trim(), next: 0, found: 0 };
      resultsList.replaceChildren();
    }
    searchAllButton.disabled = resultsMore.disabled = true;
    resultsSummary.textContent = `searching ${searched.worker}'s log…`;
    try {
      const query = new URLSearchParams({ worker: searched.worker, q: searched.term, from: String(searched.next) });
      const response = await fetch(`${searchApi}?${query}`, { credentials: "same-origin",
        headers: { Accept: "application/json" }, signal: AbortSignal.timeout(FETCH_MS) });
      const data = await response.json();
      if (!response.ok) throw new Error(data.detail || `HTTP ${response.status}`);
      data.matches.forEach((match) => resultsList.append(result(match)));
      searched.found += data.matches.length;
      searched.next = data.next;
      const lines = `${searched.found} line${searched.found === 1 ? "" : "s"}`;
      resultsSummary.textContent = data.next === null
        ? `${lines} of ${searched.worker}'s whole log (${size(data.size)}) ${searched.found === 1 ? "holds" : "hold"} "${searched.term}"; choose one to open the log there.`
        : `${lines} so far, searched to ${size(data.next)} of ${size(data.size)}; choose one to open the log there.`;
      resultsMore.hidden = data.next === null;
    } catch (error) {
      resultsSummary.textContent = `could not search: ${error.message}`;
    } finally {
      searchAllButton.disabled = resultsMore.disabled = false;
    }
  }

  // The chosen worker's log from byte `offset` (a line start): paused there, the line marked.
  async function openAt(worker, offset) {
    generation += 1;
    const gen = generation;
    clearTimeout(timer);
    clearTimeout(pausedTimer);
    following = false;
    followButton.textContent = "Follow";
    followButton.classList.add("secondary");
    followButton.hidden = false;
    if (select.value !== worker) select.value = worker;
    search.value = "";  // every line from the match on: the loaded-lines filter would hide what is around it
    lines = []; pane.textContent = ""; streams = {};
    const st = stream(worker, "");
    streams[worker] = st;
    setStatus(`loading from ${size(offset)}…`);
    try {
      const data = await fetchLog(worker, { cursor: String(offset) });
      if (gen !== generation) return;
      st.start = offset;
      st.cursor = data.cursor;
      st.complete = data.complete;
      ingest(st, data.text, data.times);
    } catch (error) {
      if (gen === generation) setStatus(`could not load the log there: ${error.message}`);
      return;
    }
    render();
    olderButton.disabled = st.start <= 0;
    if (lines.length) lines[0].el.classList.add("hit");
    pane.scrollTop = 0;
    setStatus(`paused at ${size(offset)} of ${worker}'s log: Load older shows what came before, Follow reads on`);
    pausedTimer = setTimeout(() => watchPaused(gen), PAUSED_CHECK_MS);
  }

  async function choose(choice) {
    generation += 1;
    const gen = generation;
    clearTimeout(timer);
    clearTimeout(pausedTimer);
    lines = []; pane.textContent = ""; streams = {};
    const names = choice === "*" ? Array.from(select.options).map((o) => o.value).filter((v) => v !== "*") : [choice];
    names.forEach((name) => { streams[name] = stream(name, choice === "*" ? `[${name}] ` : ""); });
    download.href = `${viewer.dataset.base}${encodeURIComponent(names[0])}/download`;
    download.hidden = choice === "*";
    followButton.hidden = false;
    setStatus("loading the end of the log…");
    try {
      await Promise.all(Object.values(streams).map((st) => open(st, gen, choice === "*" ? TAIL_EACH : TAIL_ONE)));
    } catch (error) {
      if (gen === generation) setStatus(`retrying: ${error.message}`);
    }
    if (gen !== generation) return;
    olderButton.disabled = Object.values(streams).every((st) => st.start <= 0);
    render();
    toEnd();
    if (following) { tick(gen); return; }
    setStatus(`paused: ${loaded(Object.values(streams))}`);
    watchPaused(gen);
  }

  function showTimes(on) {
    pane.classList.toggle("hide-times", !on);
    try { localStorage.setItem(TIMES_KEY, on ? "1" : "0"); } catch (error) { /* private mode: not remembered */ }
  }

  followButton.addEventListener("click", () => {
    following = !following;
    followButton.textContent = following ? "Pause" : "Follow";
    followButton.classList.toggle("secondary", !following);
    if (following) { toEnd(); tick(generation); } else {
      clearTimeout(timer);
      clearTimeout(pausedTimer);
      Object.values(streams).forEach((st) => { st.peek = null; });
      setStatus(`paused: ${loaded(Object.values(streams))}`);
      pausedTimer = setTimeout(() => watchPaused(generation), PAUSED_CHECK_MS);
    }
  });
  document.getElementById("log-end").addEventListener("click", toEnd);
  searchAllButton.addEventListener("click", () => searchWhole(false));
  resultsMore.addEventListener("click", () => searchWhole(true));
  document.getElementById("log-results-close").addEventListener("click", () => { results.hidden = true; });
  search.addEventListener("keydown", (event) => { if (event.key === "Enter") searchWhole(false); });
  olderButton.addEventListener("click", loadOlder);
  search.addEventListener("input", () => { render(); if (!search.value) toEnd(); });
  select.addEventListener("change", () => {
    try { sessionStorage.setItem(CHOICE_KEY, select.value); } catch (error) { /* not remembered */ }
    choose(select.value);
  });
  // A link naming a worker (?worker=, chosen by the server) wins over the tab's remembered choice.
  if (!viewer.dataset.chosen) try {
    const kept = sessionStorage.getItem(CHOICE_KEY);
    if (kept && Array.from(select.options).some((o) => o.value === kept)) select.value = kept;
  } catch (error) { /* storage off: the first worker */ }
  try { timesBox.checked = localStorage.getItem(TIMES_KEY) !== "0"; } catch (error) { timesBox.checked = true; }
  showTimes(timesBox.checked);
  timesBox.addEventListener("change", () => showTimes(timesBox.checked));
  choose(select.value);
})();
