"""Bounds on what a notebook's cells may put into the autograded notebook (trusted side, the checker).

Every byte of output comes from untrusted code, directly (a student cell) or through a call a grade
cell made. Two rules:

- **A grade cell's verdict is the checker's.** nbgrader scores a grade cell from its outputs (an error
  output is 0, an ``execute_result`` may carry partial credit), so what the student's code displays,
  returns through the display hook or reports as an error while a grade cell calls it becomes plain
  stdout text in that cell — it can never be read as the cell's result or its error.
- **Output is bounded**: per cell and per notebook, in bytes and in lines; the rest is cut with a note
  that says how much was dropped. The grading parent never holds more than the notebook budget.
"""

from __future__ import annotations

from typing import Any

CELL_BYTES = 1 * 2**20  # output text of one cell
CELL_LINES = 10_000
NOTEBOOK_BYTES = 8 * 2**20  # output text of one notebook
MAX_OUTPUTS = 200  # output entries of one cell
SHOWN_AS_TEXT = 4_000  # characters of a student's display/result/error kept as text in a grade cell


# what one notebook may leave next to itself in autograded/ (and so in feedback/), whatever its cells
KEPT_FILES, KEPT_BYTES, KEPT_DEPTH, KEPT_FOLDERS = 200, 64 * 2**20, 8, 50


class KeptFilesBudget:
    """The files one notebook keeps, counted on the trusted side across all its cells (the sandbox's
    own per-call bound is not trusted): at most ``KEPT_FILES`` files and ``KEPT_BYTES`` bytes in all,
    ``KEPT_DEPTH`` folders deep, in ``KEPT_FOLDERS`` folders; the rest is left out, and counted."""

    def __init__(self) -> None:
        self.files: dict[str, int] = {}
        self.bytes = 0
        self.left_out = 0

    def admit(self, path: str, size: int) -> bool:
        """Whether the file at relative ``path`` (of ``size`` bytes) is kept; a rewrite of a kept file
        is charged its new size."""
        folders = {part for part in _parents(path)}
        known = {f for kept in self.files for f in _parents(kept)}
        total = self.bytes - self.files.get(path, 0) + size
        if (path not in self.files and len(self.files) >= KEPT_FILES) or total > KEPT_BYTES \
                or path.count("/") >= KEPT_DEPTH or len(known | folders) > KEPT_FOLDERS:
            self.left_out += 1
            return False
        self.files[path], self.bytes = size, total
        return True


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]


def as_text(output: dict[str, Any]) -> dict[str, Any]:
    """A student-side output produced during a grade cell, as a plain stdout stream."""
    kind = output.get("output_type")
    if kind == "stream":
        return {"output_type": "stream", "name": output.get("name", "stdout"),
                "text": str(output.get("text", ""))}
    if kind == "error":
        text = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
    else:
        found = output.get("data")
        data: dict[str, Any] = found if isinstance(found, dict) else {}
        text = str(data.get("text/plain", f"<{kind} output of the submission>"))
    return {"output_type": "stream", "name": "stdout",
            "text": f"[the submission's code showed] {text[:SHOWN_AS_TEXT]}\n"}


def _size(output: dict[str, Any]) -> tuple[int, int]:
    """(bytes, lines) an output holds."""
    parts: list[str] = []
    if output.get("output_type") == "stream":
        parts.append(str(output.get("text", "")))
    elif output.get("output_type") == "error":
        parts += [str(output.get("ename", "")), str(output.get("evalue", ""))]
        parts += [str(line) for line in output.get("traceback", [])]
    else:
        parts += [str(v) for v in (output.get("data") or {}).values()]
    text = "".join(parts)
    return len(text.encode("utf-8", "replace")), text.count("\n")


class OutputBudget:
    """What is left of one notebook's output budget; ``bound`` cuts one cell's outputs to it."""

    def __init__(self, notebook_bytes: int = NOTEBOOK_BYTES) -> None:
        self.left = notebook_bytes

    def bound(self, outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept: list[dict[str, Any]] = []
        cell_bytes = cell_lines = dropped_bytes = dropped_outputs = 0
        for output in outputs:
            size, lines = _size(output)
            room = min(CELL_BYTES - cell_bytes, self.left)
            if len(kept) >= MAX_OUTPUTS or size > room or cell_lines + lines > CELL_LINES:
                if output.get("output_type") == "stream" and room > 0 and len(kept) < MAX_OUTPUTS:
                    text = str(output.get("text", ""))
                    allowed_lines = max(0, CELL_LINES - cell_lines)
                    cut = "".join(text.splitlines(keepends=True)[:allowed_lines])
                    cut = cut.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
                    if cut:
                        kept.append(dict(output, text=cut))
                        cut_size, cut_lines = _size(kept[-1])
                        cell_bytes, cell_lines = cell_bytes + cut_size, cell_lines + cut_lines
                        self.left -= cut_size
                        size -= cut_size
                dropped_bytes += max(size, 0)
                dropped_outputs += 1
                continue
            kept.append(output)
            cell_bytes, cell_lines = cell_bytes + size, cell_lines + lines
            self.left -= size
        if dropped_outputs:
            kept.append({"output_type": "stream", "name": "stderr",
                         "text": f"\n[output truncated by the grader: {dropped_bytes} more bytes in "
                                 f"{dropped_outputs} output(s) past the limits of "
                                 f"{CELL_BYTES // 2**20} MiB / {CELL_LINES} lines per cell and "
                                 f"{NOTEBOOK_BYTES // 2**20} MiB per notebook]\n"})
        return kept
