// The review page's behaviour: plain JavaScript, no library. Marks go to the server at once
// (/api/mark, /api/undo, /api/accept), each request with the page's CSRF token; the server answers
// with the note's text re-rendered, which replaces the old one.
"use strict";

const csrf = document.querySelector('meta[name="csrf"]').content;

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  const answer = await response.json().catch(() => ({ error: `${response.status}` }));
  if (!response.ok) {
    alert(`Not stored: ${answer.error || response.status}`);
    throw new Error(answer.error);
  }
  return answer;
}

document.getElementById("reviewer-form")?.addEventListener("submit", async (event) => {
  event.preventDefault();
  await post("/reviewer", { name: event.target.elements.name.value });
  location.reload();
});

const source = document.getElementById("source");
if (source) notePage();

function notePage() {
  let data = JSON.parse(document.getElementById("note-data").textContent);
  const picker = document.getElementById("picker");
  const menu = document.getElementById("menu");
  const keys = "1234567890-=";
  let selected = null; // {start, end} of the text selected for a missed mark
  let clicked = null; // the detection clicked

  // The offset in the note (in code points, as Python counts) of a point of the selection.
  function offsetOf(node, offset) {
    if (node.nodeType !== Node.TEXT_NODE) {
      const child = node.childNodes[offset];
      if (child) return offsetOf(child.nodeType === Node.TEXT_NODE ? child : child.firstChild || child, 0);
      const last = node.lastChild;
      if (!last) return null;
      const text = last.nodeType === Node.TEXT_NODE ? last : last.lastChild;
      return text ? offsetOf(text, text.data.length) : null;
    }
    const segment = node.parentElement.closest("[data-o]");
    if (!segment || !source.contains(segment)) return null;
    return Number(segment.dataset.o) + [...node.data.slice(0, offset)].length;
  }

  function place(popup, rect) {
    popup.hidden = false;
    popup.style.left = `${Math.max(8, window.scrollX + rect.left)}px`;
    popup.style.top = `${window.scrollY + rect.bottom + 6}px`;
  }

  function close() {
    picker.hidden = true;
    menu.hidden = true;
    selected = clicked = null;
  }

  function show(answer) {
    source.innerHTML = answer.html;
    data = answer.data;
    const c = answer.counts;
    document.getElementById("counts").textContent =
      `${c.missed || 0} missed, ${c.wrong || 0} wrong, ${c.category || 0} recategorised`;
    close();
  }

  const mark = (body) => post("/api/mark", { note_id: data.note_id, ...body }).then(show);
  const undo = (id) => post("/api/undo", { note_id: data.note_id, id }).then(show);

  source.addEventListener("mouseup", () => {
    const selection = window.getSelection();
    if (!selection.rangeCount || selection.isCollapsed) return;
    const range = selection.getRangeAt(0);
    if (!source.contains(range.commonAncestorContainer)) return;
    const start = offsetOf(range.startContainer, range.startOffset);
    const end = offsetOf(range.endContainer, range.endOffset);
    if (start === null || end === null || end <= start) return;
    menu.hidden = true;
    selected = { start, end };
    place(picker, range.getBoundingClientRect());
  });

  source.addEventListener("click", (event) => {
    const selection = window.getSelection();
    if (selection && !selection.isCollapsed) return; // a selection, not a click
    const segment = event.target.closest("[data-o]");
    if (!segment || (segment.dataset.det === undefined && !segment.dataset.marks)) return close();
    picker.hidden = true;
    const title = document.getElementById("menu-title");
    const list = document.getElementById("menu-marks");
    list.replaceChildren();
    clicked = segment.dataset.det !== undefined ? data.detections[Number(segment.dataset.det)] : null;
    title.textContent = clicked ? clicked.explained : "Marked missed";
    const covering = data.marks.filter((m) =>
      clicked ? m.start === clicked.start && m.end === clicked.end : (segment.dataset.marks || "").split(",").includes(String(m.id)));
    for (const m of covering.filter((m) => m.mine)) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "undo-mark";
      button.textContent = `Undo your mark: ${m.verdict === "missed" ? "missed " + m.category : m.verdict === "wrong" ? "not PHI" : "should be " + m.category}`;
      button.addEventListener("click", () => undo(m.id));
      list.append(button);
    }
    for (const m of covering.filter((m) => !m.mine)) {
      const line = document.createElement("div");
      line.textContent = `${m.reviewer || "an import"}: ${m.verdict} ${m.category}`;
      list.append(line);
    }
    document.getElementById("mark-wrong").hidden = !clicked;
    document.getElementById("menu-categories").parentElement.querySelector(".popup-sub").hidden = !clicked;
    document.getElementById("menu-categories").hidden = !clicked;
    place(menu, segment.getBoundingClientRect());
  });

  picker.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-category]");
    if (button && selected) mark({ ...selected, category: button.dataset.category, verdict: "missed" });
  });
  document.getElementById("mark-wrong").addEventListener("click", () => {
    if (clicked) mark({ start: clicked.start, end: clicked.end, category: clicked.category, verdict: "wrong" });
  });
  document.getElementById("menu-categories").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-category]");
    if (button && clicked) mark({ start: clicked.start, end: clicked.end, category: button.dataset.category, verdict: "category" });
  });
  document.getElementById("undo").addEventListener("click", () => undo(null));
  const accept = () => post("/api/accept", { note_id: data.note_id }).then((answer) => { location.href = answer.next; });
  document.getElementById("accept").addEventListener("click", accept);

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.target.closest("input, textarea, select")) return;
    if (event.key === "Escape") return close();
    if (!picker.hidden && keys.includes(event.key)) {
      const category = data.categories[keys.indexOf(event.key)];
      if (category && selected) mark({ ...selected, category, verdict: "missed" });
      return;
    }
    const link = { n: "next", p: "previous" }[event.key];
    if (link && document.getElementById(link)) location.href = document.getElementById(link).href;
    else if (event.key === "a") accept();
    else if (event.key === "u") undo(null);
  });
}
