"""The book: chapter execution (:mod:`~lamina.book.execute`, ``python -m lamina.book``),
offline charts and glue (:mod:`~lamina.book.glue`), the methods page
(:mod:`~lamina.book.methods`), the scorecard pages (:mod:`~lamina.book.scorecard`) and the
blocks the chapter notebooks share (:mod:`~lamina.book.chapter`, imported on its own).
"""

from lamina.book.execute import CHAPTERS, execute_chapter
from lamina.book.glue import glue, setup_altair

__all__ = ["CHAPTERS", "execute_chapter", "glue", "setup_altair"]
