// Job page: follow the chosen worker's log by cursor (never a line missed or repeated) and the state.
(function () {
  const log = document.getElementById("log");
  const jobApi = document.getElementById("job").dataset.api;
  let worker = "trainer-0", cursor = "", timer = null, generation = 0;

  async function poll(gen) {
    if (gen !== generation) return;
    try {
      const url = `${log.dataset.api}?worker=${encodeURIComponent(worker)}&cursor=${encodeURIComponent(cursor)}`;
      const response = await fetch(url, { credentials: "same-origin" });
      if (response.ok && gen === generation) {
        const data = await response.json();
        if (data.text) {
          const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
          log.textContent += data.text;
          if (atBottom) log.scrollTop = log.scrollHeight;
        }
        cursor = data.cursor;
        if (data.complete) return;
      }
    } catch (e) { /* the portal restarted: try again on the next tick */ }
    timer = setTimeout(() => poll(gen), 1000);
  }

  async function pollState() {
    try {
      const data = await (await fetch(jobApi, { credentials: "same-origin" })).json();
      document.getElementById("job-state").textContent = data.state;
      document.getElementById("job-state").className = `state-${data.state}`;
      document.getElementById("job-reason").textContent = data.reason;
      document.getElementById("job-message").textContent = data.message;
      if (["succeeded", "failed", "killed"].includes(data.state)) return;
    } catch (e) { /* retry */ }
    setTimeout(pollState, 2000);
  }

  function choose(name) {
    worker = name; cursor = ""; log.textContent = ""; generation += 1;
    clearTimeout(timer);
    document.querySelectorAll(".log-tab").forEach((b) => b.classList.toggle("active", b.dataset.worker === name));
    poll(generation);
  }

  document.querySelectorAll(".log-tab").forEach((b) => b.addEventListener("click", () => choose(b.dataset.worker)));
  choose(worker);
  pollState();
})();
