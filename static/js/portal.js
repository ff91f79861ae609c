// Every page: forms and buttons marked data-confirm ask before they act (no inline handlers: the CSP).
document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form.dataset.confirm || (event.submitter && event.submitter.dataset.confirm);
  if (question && !window.confirm(question)) event.preventDefault();
}, true);

// Every page: one time rule (portal/templatetags/times.py). A <time data-local> the server wrote in UTC is shown in
// the browser's zone, ISO-style and 24-hour, with the zone's short name; every <time datetime> (relative ones too)
// gets the full local time with its offset on hover. Run again on whatever htmx swaps in.
window.paddlecloudTimes = (() => {
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  const zone = (d) => {
    const part = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(d)
      .find((p) => p.type === "timeZoneName");
    return part ? part.value : "local";
  };
  const day = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  const clock = (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  const offset = (d) => {
    const minutes = -d.getTimezoneOffset(), sign = minutes < 0 ? "-" : "+", a = Math.abs(minutes);
    return `UTC${sign}${pad(Math.floor(a / 60))}:${pad(a % 60)}`;
  };
  const shown = {
    second: (d) => `${day(d)} ${clock(d)}`, time: clock, minute: (d) => `${day(d)} ${clock(d).slice(0, 5)}`, date: day,
  };
  const full = (d) => `${day(d)} ${clock(d)} ${zone(d)} (${offset(d)})`;
  // A server-written "2026-11-27 20:53[:51] UTC" in a hover text, in the browser's zone.
  const inLocal = (text) => text.replace(/(\d{4}-\d\d-\d\d) (\d\d:\d\d(?::\d\d)?) UTC/g,
    (match, date, time) => full(new Date(`${date}T${time}Z`)));
  function localize(root) {
    root.querySelectorAll("time[datetime]:not([data-localized])").forEach((el) => {
      const d = new Date(el.getAttribute("datetime"));
      if (Number.isNaN(d.getTime())) return;
      el.dataset.localized = "1";
      const kind = el.dataset.local;
      if (kind && shown[kind]) {
        el.textContent = kind === "date" ? shown.date(d) : `${shown[kind](d)} ${zone(d)}`;
        el.title = full(d);
      } else {
        const said = el.getAttribute("title") || "";
        el.title = / UTC/.test(said) ? inLocal(said) : [full(d), said].filter(Boolean).join("; ");
      }
    });
  }
  document.addEventListener("DOMContentLoaded", () => localize(document));
  document.addEventListener("htmx:afterSettle", (event) => localize(event.target));
  return { zone, day, clock, full, inLocal, localize };
})();
