"""``python -m lamina.book``: see :func:`lamina.book.execute.main`."""

from lamina.book.execute import main

raise SystemExit(main())
