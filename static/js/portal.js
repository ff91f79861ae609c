// Every page: forms and buttons marked data-confirm ask before they act (no inline handlers: the CSP).
document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form.dataset.confirm || (event.submitter && event.submitter.dataset.confirm);
  if (question && !window.confirm(question)) event.preventDefault();
}, true);
