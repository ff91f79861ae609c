// Job page tabs (WAI-ARIA tabs): Overview, Metrics, Resources, Logs, Spec. The URL's hash names the open tab
// (#metrics: a link opens it); without one, the tab last open on this job's page in this browser tab (a kill
// or delete reloads the page); arrow keys, Home and End move between tabs. Without JavaScript
// the tab bar stays hidden and every panel shows, one after another. Charts in a panel opened later are
// sized when it shows (their ResizeObservers).
(function () {
  const bar = document.querySelector("[data-tabs]");
  if (!bar) return;
  const tabs = Array.from(bar.querySelectorAll("button[data-tab]"));
  const panels = new Map(tabs.map((tab) => [tab.dataset.tab, document.getElementById(`panel-${tab.dataset.tab}`)]));
  bar.setAttribute("role", "tablist");
  for (const tab of tabs) {
    const panel = panels.get(tab.dataset.tab);
    tab.id = `tab-${tab.dataset.tab}`;
    tab.setAttribute("role", "tab");
    tab.setAttribute("aria-controls", panel.id);
    panel.setAttribute("role", "tabpanel");
    panel.setAttribute("aria-labelledby", tab.id);
  }

  function show(name, focus) {
    if (!panels.has(name)) name = tabs[0].dataset.tab;
    for (const tab of tabs) {
      const open = tab.dataset.tab === name;
      tab.setAttribute("aria-selected", open ? "true" : "false");
      tab.tabIndex = open ? 0 : -1;
      tab.classList.toggle("active", open);
      panels.get(tab.dataset.tab).hidden = !open;
      if (open && focus) tab.focus();
    }
    bar.dataset.open = name;
  }

  const KEPT = `paddlecloud.jobTab:${location.pathname}`;
  function choose(name, focus) {
    show(name, focus);
    history.replaceState(null, "", `#${name}`);
    try { sessionStorage.setItem(KEPT, name); } catch (error) { /* storage off: not remembered */ }
  }

  tabs.forEach((tab, index) => {
    tab.addEventListener("click", () => choose(tab.dataset.tab));
    tab.addEventListener("keydown", (event) => {
      const moves = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: tabs.length - 1 };
      if (!(event.key in moves)) return;
      event.preventDefault();
      choose(tabs[(moves[event.key] + tabs.length) % tabs.length].dataset.tab, true);
    });
  });
  window.addEventListener("hashchange", () => show(location.hash.slice(1)));
  let kept = "";
  try { kept = sessionStorage.getItem(KEPT) || ""; } catch (error) { /* storage off */ }
  show(location.hash.slice(1) || kept);
})();
