// lamina: one "show all code" toggle per chapter. Every code cell of a chapter is folded
// (Jupyter Book's hide-input tag); this button, under the title, opens or folds them all.
document.addEventListener("DOMContentLoaded", () => {
  const article = document.querySelector("article.bd-article");
  if (!article) return;
  const folds = article.querySelectorAll("details.above-input, details.below-input");
  if (!folds.length) return;
  const button = document.createElement("button");
  button.type = "button";
  button.className = "lamina-code-toggle";
  button.setAttribute("aria-pressed", "false");
  const label = (open) => (open ? "Hide all code" : "Show all code");
  button.textContent = label(false);
  button.addEventListener("click", () => {
    const open = button.getAttribute("aria-pressed") !== "true";
    folds.forEach((d) => { d.open = open; });
    button.setAttribute("aria-pressed", String(open));
    button.textContent = label(open);
  });
  const title = article.querySelector("h1");
  if (title) title.insertAdjacentElement("afterend", button);
  else article.prepend(button);
});
