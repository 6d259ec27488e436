"""How the book shows a data frame: inside an explicit scroll container, so a wide table never
pushes past the text column, with its ``verdict`` column as badges and placed first.

:func:`install_table_formatter` (called by ``lamina.book.setup_altair``) makes this the
HTML form of every ``pandas.DataFrame`` a chapter displays.
"""

from __future__ import annotations

from typing import Any

from lamina.book.badges import badge

__all__ = [
    "details_html",
    "install_table_formatter",
    "notes_html",
    "show_details",
    "show_notes_folded",
    "show_verdicts",
    "table_html",
    "verdict_grid_html",
]

MAX_ROWS = 60  # rows shown; a longer table shows its head and tail


def table_html(frame: Any) -> str:
    """``frame`` (a pandas DataFrame) as HTML: a ``verdict`` column, when present, moves to
    the front (after ``claim_id`` / ``model`` when those lead) and shows badges; the table sits
    in ``<div class="lamina-scroll">``."""
    import html

    import pandas as pd

    df = frame.copy()
    if len(df) > MAX_ROWS:
        half = MAX_ROWS // 2
        df = pd.concat([df.head(half), df.tail(half)])
    if "verdict" in df.columns:
        lead = [c for c in ("claim_id", "model") if c in df.columns]
        rest = [c for c in df.columns if c not in (*lead, "verdict")]
        df = df[[*lead, "verdict", *rest]]
    # escape every text cell here, so that to_html can leave the badges' HTML alone
    for col in df.columns:
        if col == "verdict":
            ids = df["claim_id"].astype(str) if "claim_id" in df.columns else [None] * len(df)
            df[col] = [badge(str(v), claim=c) for v, c in zip(df[col], ids, strict=True)]
        elif df[col].dtype == object or isinstance(df[col].dtype, pd.StringDtype):
            df[col] = [v if not isinstance(v, str) else html.escape(v) for v in df[col]]
    if not isinstance(df.columns, pd.MultiIndex):
        df.columns = [html.escape(str(c)) for c in df.columns]
    if not isinstance(df.index, pd.MultiIndex):
        name = df.index.name
        df.index = pd.Index(
            [html.escape(str(i)) for i in df.index],
            name=html.escape(str(name)) if name is not None else None,
        )
    body = df.to_html(
        escape=False,
        float_format=lambda x: f"{x:.4g}",
        classes="lamina-table",
        border=0,
        na_rep="–",
    )
    note = (
        f'<p class="lamina-table-note">{MAX_ROWS} of {len(frame)} rows shown.</p>'
        if len(frame) > MAX_ROWS
        else ""
    )
    return f'<div class="lamina-scroll">{body}</div>{note}'


def install_table_formatter() -> None:
    """Register :func:`table_html` as the HTML form of ``pandas.DataFrame`` in the running
    IPython kernel (a no-op outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import pandas as pd

    shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, table_html)


def details_html(body: Any, summary: str) -> str:
    """``body`` folded in a static ``<details class="lamina-details">`` block whose
    ``<summary>`` reads ``summary`` (escaped): a DataFrame is rendered by :func:`table_html`
    (with its row count in the summary), a string is taken as HTML. Works without JavaScript,
    so Jupyter Book shows it closed and the reader opens it."""
    import html

    import pandas as pd

    if isinstance(body, pd.DataFrame):
        inner = table_html(body)
        label = f"{summary} ({len(body)} rows)"
    else:
        inner, label = str(body), summary
    return (
        f'<details class="lamina-details"><summary>{html.escape(label)}</summary>\n'
        f"{inner}\n</details>"
    )


def show_details(body: Any, summary: str) -> None:
    """Display :func:`details_html` of ``body``: a detail table the reader can open."""
    from IPython.display import HTML, display

    display(HTML(details_html(body, summary)))


def notes_html(notes: Any, summary: str = "Notes on the models") -> str:
    """The distinct ``notes`` (strings, first-occurrence order) as a bulleted list folded in a
    ``<details>`` block (:func:`details_html`) whose summary counts them; "" when there are
    none. Each note is escaped, and `code` spans become ``<code>``."""
    import html
    import re

    items = list(dict.fromkeys(str(n) for n in notes))
    if not items:
        return ""
    lis = "".join(
        "<li>" + re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(n)) + "</li>" for n in items
    )
    return details_html(f"<ul>{lis}</ul>", f"{summary} ({len(items)})")


def show_notes_folded(notes: Any, summary: str = "Notes on the models") -> None:
    """Display :func:`notes_html` of ``notes`` (nothing when there are none)."""
    from IPython.display import HTML, display

    text = notes_html(notes, summary)
    if text:
        display(HTML(text))


def verdict_grid_html(claims: Any, rows: str = "claim_id", columns: Any = ("model",)) -> str:
    """The verdicts of ``claims`` (a DataFrame with a ``verdict`` column) as a compact grid:
    one row per value of ``rows`` (first-seen order), one column per combination of the
    ``columns`` fields (joined with " · "), each cell the badge of the first verdict of that
    pair ("–" where there is none). A chapter shows it in the flow; the full table with values,
    CIs and p follows folded (:func:`show_verdicts`)."""
    import html

    import pandas as pd

    df = claims.reset_index() if rows not in claims.columns else claims
    cols = [c for c in columns if c in df.columns]
    key = df[cols].astype(str).agg(" · ".join, axis=1) if cols else pd.Series("", index=df.index)
    row_keys = list(dict.fromkeys(df[rows].astype(str)))
    col_keys = list(dict.fromkeys(key))
    cell: dict[tuple[str, str], str] = {}
    for r, c, v in zip(df[rows].astype(str), key, df["verdict"].astype(str), strict=True):
        cell.setdefault((r, c), v)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in col_keys)
    body = "".join(
        f"<tr><th>{html.escape(r)}</th>"
        + "".join(f"<td>{badge(cell[(r, c)], claim=r if rows == 'claim_id' else None)}</td>"
                  if (r, c) in cell else "<td>–</td>" for c in col_keys)
        + "</tr>"
        for r in row_keys
    )
    table = (
        f'<table class="lamina-table lamina-verdict-grid"><thead><tr><th>{html.escape(rows)}'
        f"</th>{head}</tr></thead><tbody>{body}</tbody></table>"
    )
    return f'<div class="lamina-scroll">{table}</div>'


def show_verdicts(
    claims: Any,
    rows: str = "claim_id",
    columns: Any = ("model",),
    summary: str = "Every verdict with its measured value, 95% CI and p",
) -> None:
    """Display :func:`verdict_grid_html` of ``claims`` (in the flow), then the full
    ``claims`` table folded in ``<details>`` (:func:`details_html`)."""
    from IPython.display import HTML, display

    display(HTML(verdict_grid_html(claims, rows, columns)))
    display(HTML(details_html(claims, summary)))
