"""``python -m lamina.book``: see :func:`lamina.book.cli.main`."""

from lamina.book.cli import main

raise SystemExit(main())
