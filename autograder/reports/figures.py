"""Figures shared by the report and the service's instructor view: matplotlib (Agg) to base64 PNG."""

from __future__ import annotations

import base64
import io


def png(fig) -> str:
    """``fig`` as a base64 PNG (for an ``<img src="data:image/png;base64,...">``)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def score_distribution(scores: dict[str, list[float]], top: dict[str, float],
                       *, ylabel: str = "students") -> str | None:
    """One histogram per assignment (integer bins up to its maximum ``top``, whole-number ticks), as a
    base64 PNG; None when no assignment has a score."""
    graded = [a for a in scores if scores[a]]
    if not graded:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    cols = min(3, len(graded))
    rows = (len(graded) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.8 * rows), squeeze=False)
    for ax, assignment in zip(axes.flat, graded, strict=False):
        ax.hist(scores[assignment], bins=[x - 0.5 for x in range(int(top[assignment]) + 2)],
                color="#4878a8")
        ax.set_title(f"{assignment} (n={len(scores[assignment])})", fontsize=10)
        ax.set_xlabel(f"score / {top[assignment]:g}")
        ax.set_ylabel(ylabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # scores and counts are whole:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # no 0.5-student ticks
    for ax in list(axes.flat)[len(graded):]:
        ax.axis("off")
    fig.tight_layout()
    encoded = png(fig)
    plt.close(fig)
    return encoded
