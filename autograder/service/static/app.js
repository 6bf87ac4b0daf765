// Live status and feedback of one submission, from the JSON API (text only: never innerHTML).
"use strict";
(function () {
  const state = document.getElementById("state");
  if (!state) return;
  const api = state.dataset.api;
  const xsrf = document.querySelector('meta[name="xsrf"]').content;
  // the page's strings in the reader's language (web.py script_strings; English if absent)
  const holder = document.getElementById("strings");
  const t = holder ? JSON.parse(holder.textContent) : {};
  const say = (key, english, fields) => Object.entries(fields || {}).reduce(
    (text, [name, value]) => text.split("{" + name + "}").join(String(value)), t[key] || english);
  const el = (tag, text, cls) => {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  };
  function render(s) {
    state.textContent = say(s.state === "failed" ? "failed" : s.state, s.state);
    state.className = "state-" + s.state;
    document.getElementById("position").textContent =
      s.state === "queued" && s.waiting ? say("waiting", "(waiting: {reason})", { reason: s.waiting }) :
      s.state === "queued" && s.position !== undefined ?
        say("ahead", "({count} ahead of you)", { count: s.position }) : "";
    const box = document.getElementById("feedback");
    box.replaceChildren();
    if (s.state === "failed") {
      box.append(el("p", say("not_graded", "Not graded: {reason}",
        { reason: s.reason || say("unknown", "unknown reason") }), "error"));
    }
    if (s.state === "error") {
      box.append(el("p", s.reason || say("error", "grader error"), "error"));
    }
    if (s.state !== "done") return;
    if (s.score !== undefined) {
      box.append(el("p", say("score", "Score: {score} / {max_score}",
        { score: s.score, max_score: s.max_score }), "score"));
    } else {
      box.append(el("p", s.score_later
        ? say("later", "Graded. The course shows scores after the due date.")
        : say("never", "Graded. The course does not show the score of this submission."), "score"));
    }
    (s.notices || []).forEach((n) => box.append(el("p", n, "notice")));
    if (!s.tests) return;
    const table = el("table");
    table.id = "tests";
    const head = el("tr");
    [say("test", "Test"), say("kind", "Kind"), say("points", "Points"), say("result", "Result")]
      .forEach((h) => head.append(el("th", h)));
    table.append(head);
    s.tests.forEach((test) => {
      const row = el("tr", null, test.passed ? "passed" : "failed");
      row.append(el("td", test.name), el("td", test.hidden ? say("both", "visible + hidden") : say("visible", "visible")),
        el("td", test.points + " / " + test.max_points),
        el("td", test.passed ? say("passed", "passed") : say("failed_test", "failed")));
      table.append(row);
      if (!test.passed && test.message) {
        const detail = el("tr", null, "message");
        const cell = el("td");
        cell.colSpan = 4;
        cell.append(el("pre", test.message));
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
      document.getElementById("feedback").replaceChildren(el("p",
        say("no_load", "Could not load: {error}", { error: error.message }), "error"));
      setTimeout(poll, 3000);
    }
  }
  poll();
})();
