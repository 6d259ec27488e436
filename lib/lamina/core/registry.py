"""The chapter registry: one record per chapter, the single place a chapter is declared.

Everything that lists chapters derives from :data:`REGISTRY`: the order of execution
(:data:`lamina.book.execute.CHAPTERS`), the scorecard's chapter-to-paper map
(:data:`lamina.book.scorecard.CHAPTER_PAPER`), which chapters the calibration page calibrates
(:data:`lamina.trajectory.calibration` reads :func:`calibrated`) and the table of contents'
check (``tests/core/test_registry.py``).

Adding a chapter means three things: ``notebooks/<name>.py`` (a jupytext notebook with a
``parameters`` cell), its module ``lamina/chapters/<name>.py`` (or package), and one
:class:`ChapterRecord` below (plus its line in ``_toc.yml``, which the test checks).

This module is data: it imports nothing of lamina, so every layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["REGISTRY", "ChapterRecord", "by_name", "calibrated", "chapter_paper", "names"]


@dataclass(frozen=True)
class ChapterRecord:
    """One chapter of the book.

    name: the notebook's stem (``notebooks/<name>.py``) and the chapter module's name
        (``lamina.chapters.<name>``); results land in ``<results>/<model>/<name>.json``.
    paper: the paper whose claims the chapter tests (1, 2 or 3), or None for a chapter that
        tests no claim (the tour) or builds an instrument (the organisms).
    calibrated: whether the calibration page (``lamina.trajectory.calibration``) runs the
        chapter's claim tests on the known-answer sources.
    default_models: the models ``model="default"`` runs, in order
        (:func:`lamina.chapters.models.chapter_models`): an offline model whose wheel is missing,
        an organism not built and paper 1's release when absent are skipped with a note;
        ``"peer-*"`` stands for every model folder of paper 1's release.
    stem: the chapter's part of its claim ids (``p<paper>-<stem>-<name>``); default the name
        with dashes.
    """

    name: str
    paper: int | None
    calibrated: bool = False
    default_models: tuple[str, ...] = ()
    stem: str = ""

    def __post_init__(self) -> None:
        if not self.stem:
            object.__setattr__(self, "stem", self.name.replace("_", "-"))

    @property
    def claim_prefixes(self) -> tuple[str, ...]:
        """Every claim id the chapter writes starts with one of these
        (``lamina.evidence.claims.claim_id``: ``p<paper>-<stem>-`` for the paper's claims,
        ``self-<stem>-`` for self-checks)."""
        heads = ("self",) if self.paper is None else (f"p{self.paper}", "self")
        return tuple(f"{h}-{self.stem}-" for h in heads)

    @property
    def notebook(self) -> str:
        """The notebook's path relative to the checkout: ``notebooks/<name>.py``."""
        return str(Path("notebooks") / f"{self.name}.py")


_PRETRAINED = ("smollm2-135m-instruct", "gemma-3-270m")
_TRAJECTORY = (*_PRETRAINED, "peer-*", "minilm", "organism-gpt2", "organism-llama")

# Book order.
REGISTRY: tuple[ChapterRecord, ...] = (
    ChapterRecord("trajectory_tour", None, default_models=(*_PRETRAINED, "minilm")),
    ChapterRecord("convergence", 1, True, _TRAJECTORY),
    ChapterRecord("curvature", 1, True, _TRAJECTORY),
    ChapterRecord("bifurcation", 1, True, _TRAJECTORY),
    ChapterRecord("three_phase", 1, True, _TRAJECTORY),
    ChapterRecord("reanalysis", 1, default_models=_PRETRAINED),
    ChapterRecord(
        "weight_update_signature", 2,
        default_models=(*_PRETRAINED, "organism-gpt2", "organism-llama"), stem="signature",
    ),
    ChapterRecord("layer_anatomy", 3, default_models=(*_PRETRAINED, "organism-llama"),
                  stem="anatomy"),
    ChapterRecord("growth_training", 3, default_models=_PRETRAINED, stem="growth"),
    ChapterRecord("organisms", None, default_models=("organism-gpt2", "organism-llama")),
)  # fmt: skip


def names() -> list[str]:
    """The chapters' names in book order."""
    return [c.name for c in REGISTRY]


def by_name(name: str) -> ChapterRecord:
    """The record of chapter ``name``; KeyError naming the known chapters otherwise."""
    for record in REGISTRY:
        if record.name == name:
            return record
    raise KeyError(f"no chapter {name!r} in the registry; known: {names()}")


def chapter_paper() -> dict[str, int]:
    """{chapter: paper} for every chapter that tests a paper's claims, in book order."""
    return {c.name: c.paper for c in REGISTRY if c.paper is not None}


def calibrated() -> tuple[str, ...]:
    """The chapters whose claim tests the calibration page runs, in book order."""
    return tuple(c.name for c in REGISTRY if c.calibrated)
