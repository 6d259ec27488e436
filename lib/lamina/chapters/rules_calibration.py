"""The calibration page's section on paper 3 (layer anatomy and Growth Training): every
declared claim (:data:`lamina.anatomy.calibration.CLAIMS`) with its rates on the known-answer
sources (:func:`lamina.anatomy.calibration.calibration_runs`, described by
:data:`~lamina.anatomy.calibration.CALIBRATION_SOURCES`), or "not calibrated" and why, rendered
by the page's one renderer (:func:`lamina.book.calibration.section_markdown`).

Paper 2's section is :mod:`lamina.weights.calibration`'s (issue 34: the file is split by paper).
Each seed's runs are cached by :func:`~lamina.anatomy.calibration.calibration_runs` (keyed by
the source of :mod:`lamina.anatomy` and :mod:`lamina.evidence` and the library versions), so
the section is recomputed only where they changed.

CLI: ``python -m lamina.chapters.rules_calibration OUT.md [N_SEEDS]`` (default 20 seeds).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from lamina.anatomy import calibration as anatomy_calibration
from lamina.book.calibration import Section, section_markdown
from lamina.core.provenance import atomic_write_text

__all__ = ["paper3_section", "rules_markdown"]

TITLE = "Paper 3: layer anatomy and Growth Training"


def paper3_section(n_seeds: int, *, jobs: int = 2, cache: Path | None | str = "default") -> Section:
    """Paper 3's :class:`~lamina.book.calibration.Section` over seeds 0..n_seeds-1, computed
    in ``jobs`` one-thread processes; ``cache`` as
    :func:`lamina.anatomy.calibration.calibration_runs`. Its cost line gives the seeds, the
    mean CPU seconds of a seed's computation (recorded with a cached seed) and the wall time."""
    start = time.perf_counter()
    runs = anatomy_calibration.calibration_runs(n_seeds, jobs=jobs, cache=cache)
    n_read = sum(runs.attrs["cached"])
    per_seed = f"{np.mean(runs.attrs['seconds']):.1f} s of CPU per seed on one core " + (
        "(every seed read from the cache)"
        if n_read == n_seeds
        else f"({n_read} read from the cache)"
    )
    cost = (
        f"{n_seeds} seeds per source: {per_seed}; {time.perf_counter() - start:.0f} s of wall "
        f"time in {jobs} process(es)."
    )
    return Section(
        TITLE,
        anatomy_calibration.CLAIMS,
        runs,
        anatomy_calibration.CALIBRATION_SOURCES,
        cost,
    )


def rules_markdown(
    n_seeds: int = 20, *, jobs: int = 2, cache: Path | None | str = "default"
) -> str:
    """The section's Markdown (:func:`paper3_section`, rendered by
    :func:`lamina.book.calibration.section_markdown`)."""
    return section_markdown(paper3_section(n_seeds, jobs=jobs, cache=cache))


def main(argv: list[str] | None = None) -> None:  # pragma: no cover
    """``python -m lamina.chapters.rules_calibration OUT.md [N_SEEDS]``: write the section."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or len(args) > 2:
        raise SystemExit("usage: python -m lamina.chapters.rules_calibration OUT.md [N_SEEDS]")
    n = int(args[1]) if len(args) == 2 else 20
    if n < 1:
        raise SystemExit(f"N_SEEDS must be at least 1; got {n}")
    print(atomic_write_text(args[0], rules_markdown(n)))


if __name__ == "__main__":  # pragma: no cover
    main()
