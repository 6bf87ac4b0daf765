// Live status and feedback of one submission, from the JSON API (text only: never innerHTML).
"use strict";
(function () {
  const state = document.getElementById("state");
  if (!state) return;
  const api = state.dataset.api;
  const xsrf = document.querySelector('meta[name="xsrf"]').content;
  const el = (tag, text, cls) => {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  };
  function render(s) {
    state.textContent = s.state;
    state.className = "state-" + s.state;
    document.getElementById("position").textContent =
      s.state === "queued" && s.waiting ? "(waiting: " + s.waiting + ")" :
      s.state === "queued" && s.position !== undefined ? "(" + s.position + " ahead of you)" : "";
    const box = document.getElementById("feedback");
    box.replaceChildren();
    if (s.state === "failed") {
      box.append(el("p", "Not graded: " + (s.reason || "unknown reason"), "error"));
    }
    if (s.state === "error") {
      box.append(el("p", s.reason || "grader error", "error"));
    }
    if (s.state !== "done") return;
    if (s.score !== undefined) {
      box.append(el("p", "Score: " + s.score + " / " + s.max_score, "score"));
    } else {
      box.append(el("p", "Graded. The course shows scores after the due date.", "score"));
    }
    (s.notices || []).forEach((n) => box.append(el("p", n, "notice")));
    if (!s.tests) return;
    const table = el("table");
    table.id = "tests";
    const head = el("tr");
    ["Test", "Kind", "Points", "Result"].forEach((h) => head.append(el("th", h)));
    table.append(head);
    s.tests.forEach((t) => {
      const row = el("tr", null, t.passed ? "passed" : "failed");
      row.append(el("td", t.name), el("td", t.hidden ? "visible + hidden" : "visible"),
        el("td", t.points + " / " + t.max_points), el("td", t.passed ? "passed" : "failed"));
      table.append(row);
      if (!t.passed && t.message) {
        const detail = el("tr", null, "message");
        const cell = el("td");
        cell.colSpan = 4;
        cell.append(el("pre", t.message));
        detail.append(cell);
        table.append(detail);
      }
    });
    box.append(table);
  }
  async function poll() {
    try {
      const reply = await fetch(api, { credentials: "same-origin", headers: { "X-XSRFToken": xsrf } });
      const s = await reply.json();
      if (!reply.ok) throw new Error(s.error || reply.statusText);
      render(s);
      // not graded yet: ask again when the service says (later far back in the queue: a thousand
      // pages asking every second cost the grader CPU)
      if (s.state === "queued" || s.state === "running")
        setTimeout(poll, 1000 * (s.poll_after_s || 3));
    } catch (error) {
      document.getElementById("feedback").replaceChildren(el("p", "Could not load: " + error.message, "error"));
      setTimeout(poll, 3000);
    }
  }
  poll();
})();
