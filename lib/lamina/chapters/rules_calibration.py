"""The calibration page's section on paper 2's and paper 3's verdict rules: the false-positive
rate and power of their main claims on known-answer weight updates
(:mod:`lamina.chapters.weight_update_signature.calibration`) and skip sweeps
(:mod:`lamina.chapters.layer_anatomy.calibration`), in the table format of paper 1's
(:func:`lamina.trajectory.calibration.summarise`, :func:`~lamina.trajectory.calibration.row_text`).

The section is cached as a whole under ``<data>/cache/calibration/rules-<key>.md``, keyed by
the source of every module that computes it, the number of seeds and the numpy / scipy /
pandas / torch versions.

CLI: ``python -m lamina.chapters.rules_calibration OUT.md [N_SEEDS]`` (default 20 seeds).
"""

from __future__ import annotations

import hashlib
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from lamina.chapters.layer_anatomy import calibration as anatomy_calibration
from lamina.chapters.weight_update_signature import calibration as signature_calibration
from lamina.core.provenance import atomic_write_text
from lamina.trajectory.calibration import default_cache, row_text, summarise

__all__ = ["cache_key", "rules_markdown"]

CODE = ("chapters/weight_update_signature", "chapters/layer_anatomy", "chapters/results.py",
        "weights", "anatomy", "evidence", "trajectory/calibration_legacy.py")  # under lib/lamina


def cache_key(n_seeds: int) -> str:
    """sha256 (hex) of what the section depends on: the source of :data:`CODE`, ``n_seeds``
    and the numpy / scipy / pandas / torch versions."""
    import scipy
    import torch

    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]  # lib/lamina
    for part in CODE:
        for f in sorted((root / part).rglob("*.py")) if (root / part).is_dir() else [root / part]:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    h.update(repr((n_seeds, np.__version__, scipy.__version__, pd.__version__,
                   torch.__version__)).encode())  # fmt: skip
    return h.hexdigest()


def _rows(which: str, n_seeds: int) -> pd.DataFrame:
    import torch

    torch.set_num_threads(1)
    module = signature_calibration if which == "signature" else anatomy_calibration
    return module.calibration_rows(range(n_seeds))


def _head(size: str) -> str:
    return ("| claim | main | FPR (null: reproduced, partially or smaller than claimed) "
            f"| power at {size} | power at half size | targets |\n|---|---|---|---|---|---|")


def _section(title: str, runs: pd.DataFrame, size: str) -> list[str]:
    s = summarise(runs)
    cost = float(np.mean(runs.attrs["seconds"]))
    lines = [f"### {title}", "", f"{runs['seed'].nunique()} seeds per source ({cost:.1f} s of "
             "computation per seed, all three sources, on one core).", "", _head(size)]
    lines += [row_text(r) for r in s.itertuples()]
    for r in s.itertuples():
        if not (r.calibrated and r.fpr_ok and r.power_ok):
            why = r.why_null if not r.fpr_ok else r.why_planted
            lines.append(f"\n- `{r.claim_id}` misses a target" + (f": {why}" if why else "") + ".")
    return [*lines, ""]


def rules_markdown(n_seeds: int = 20, *, jobs: int = 2, cache: Path | None = None) -> str:
    """The section's Markdown: a table per paper (claims of
    ``weight_update_signature.calibration.CLAIMS`` and ``layer_anatomy.calibration.CLAIMS``)
    over ``n_seeds`` seeds, the two papers computed in ``jobs`` processes; read from / written
    to ``cache`` (a folder; None: not cached)."""
    path = cache / f"rules-{cache_key(n_seeds)[:20]}.md" if cache is not None else None
    if path is not None and path.is_file():
        return path.read_text()
    start = time.perf_counter()
    which = ("signature", "anatomy")
    if jobs > 1:
        with ProcessPoolExecutor(min(jobs, 2)) as pool:
            sig, ana = pool.map(_rows, which, [n_seeds] * 2)
    else:
        sig, ana = (_rows(w, n_seeds) for w in which)
    text = "\n".join([
        *_section("Paper 2: Q/K alignment updates enriched; writes close to random", sig,
                  "lamina's planted size"),
        *_section("Paper 3: the critical core and its size", ana, "the paper's size"),
        f"(Computed in {time.perf_counter() - start:.0f} s of wall time.)", "",
    ])  # fmt: skip
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    return text


def main(argv: list[str] | None = None) -> None:  # pragma: no cover
    """``python -m lamina.chapters.rules_calibration OUT.md [N_SEEDS]``: write the section."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or len(args) > 2:
        raise SystemExit("usage: python -m lamina.chapters.rules_calibration OUT.md [N_SEEDS]")
    n = int(args[1]) if len(args) == 2 else 20
    if n < 1:
        raise SystemExit(f"N_SEEDS must be at least 1; got {n}")
    print(atomic_write_text(args[0], rules_markdown(n, cache=default_cache())))


if __name__ == "__main__":  # pragma: no cover
    main()
