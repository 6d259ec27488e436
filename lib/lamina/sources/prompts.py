"""Prompt families for the geometry chapters: JSONL files in ``data/prompts/``, checked on load.

Each family is one file, ``<family>.jsonl``, one JSON object a line. Every row carries ``id``,
``family`` and ``prompt``; each family adds its own fields (see :data:`SCHEMAS`). A file that
breaks its schema raises :class:`PromptFileError`, whose message names the file, the line
(1-based) and the field.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
    "bifurcation_prompts",
    "SCHEMAS",
    "FamilySchema",
    "PromptFileError",
    "list_families",
    "load_prompt_files",
    "load_prompts",
    "prompt_files",
    "prompt_sources",
    "prompts_dir",
]


class PromptFileError(ValueError):
    """A prompt file breaks its schema. ``path``, ``line`` (1-based or None) and ``field``
    (or None when the whole line or file is at fault) say where."""

    def __init__(self, path: str | Path, line: int | None, field: str | None, message: str):
        self.path = Path(path)
        self.line = line
        self.field = field
        self.reason = message
        where = str(path)
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.line, self.field, self.reason))


@dataclass(frozen=True)
class FamilySchema:
    """Required fields of one family, in column order, with their Python types."""

    name: str
    fields: dict[str, type]
    description: str


_COMMON: dict[str, type] = {"id": str, "family": str, "prompt": str}


def _schema(name: str, description: str, **extra: type) -> FamilySchema:
    return FamilySchema(name=name, fields={**_COMMON, **extra}, description=description)


SCHEMAS: dict[str, FamilySchema] = {
    s.name: s
    for s in (
        _schema(
            "semantic",
            "Sentences ending in a member of a semantic category.",
            category=str,
            item=str,
        ),
        _schema(
            "semantic_neutral",
            "The semantic family's members in two neutral frames shared by every category.",
            category=str,
            item=str,
            frame=str,
        ),
        _schema(
            "lexical",
            "Variants of a base word: bare, article, adjective, plural, possessive.",
            base=str,
            variant=str,
        ),
        _schema("analogies", "'A is to B as C is to' prompts.", subtype=str, answer=str),
        _schema(
            "reasoning",
            "Comparisons, transitive chains, syllogisms, small arithmetic.",
            subtype=str,
            answer=str,
        ),
        _schema(
            "lexical_framed",
            "Variants of a base word inside sentence frames (the curvature chapter's overlap "
            "in length with the reasoning prompts).",
            base=str,
            variant=str,
            frame=str,
        ),
        _schema(
            "reasoning_short",
            "Short comparisons, transitive chains, syllogisms and sums (3-12 words).",
            subtype=str,
            answer=str,
        ),
        _schema(
            "ambiguous",
            "Homographs in two senses, each with a matched unambiguous control.",
            word=str,
            pair_id=str,
            sense=str,
            sense_label=str,
            gloss=str,
            control_word=str,
            control_prompt=str,
            word_last=bool,
        ),
        _schema(
            "perturbations",
            "Prompt pairs differing by a small lexical edit, for stability.",
            kind=str,
            perturbed=str,
        ),
    )
}

_SENSES = ("ctx1", "ctx2")


def list_families() -> list[str]:
    """Names of the prompt families lamina knows, in canonical order."""
    return list(SCHEMAS)


def prompts_dir() -> Path:
    """Directory holding ``<family>.jsonl``: ``$LAMINA_DATA/prompts`` when it exists, else the
    repository's ``data/prompts`` (the repository root is the parent of ``lib/``)."""
    env = os.environ.get("LAMINA_DATA")
    if env and (Path(env) / "prompts").is_dir():
        return Path(env) / "prompts"
    return Path(__file__).resolve().parents[3] / "data" / "prompts"


def _resolve(path_or_family: str | os.PathLike[str]) -> tuple[Path, str | None]:
    text = os.fspath(path_or_family)
    if text in SCHEMAS:
        path = prompts_dir() / f"{text}.jsonl"
        if not path.is_file():
            raise PromptFileError(path, None, None, f"prompt family '{text}' has no file here")
        return path, text
    path = Path(text)
    if not path.is_file():
        raise PromptFileError(
            path,
            None,
            None,
            f"no such prompt file, and not a family name; families: {list(SCHEMAS)}",
        )
    return path, path.stem if path.stem in SCHEMAS else None


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check_type(path: Path, line: int, field: str, value: Any, kind: type) -> None:
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if not ok:
        raise PromptFileError(
            path, line, field, f"expected {kind.__name__}, got {_type_name(value)} ({value!r})"
        )
    if kind is str and not value.strip():
        raise PromptFileError(path, line, field, "empty string")
    if field == "prompt" and value != value.strip():
        raise PromptFileError(path, line, field, "leading or trailing whitespace")


def _check_ambiguous_row(path: Path, line: int, row: dict[str, Any]) -> None:
    word, prompt = row["word"], row["prompt"]
    if row["sense"] not in _SENSES:
        raise PromptFileError(
            path, line, "sense", f"must be one of {_SENSES}, got {row['sense']!r}"
        )
    hits = re.findall(rf"\b{re.escape(word)}\b", prompt)
    if len(hits) != 1:
        raise PromptFileError(
            path, line, "prompt", f"must contain the word {word!r} exactly once, found {len(hits)}"
        )
    expected = re.sub(rf"\b{re.escape(word)}\b", row["control_word"], prompt, count=1)
    if row["control_prompt"] != expected:
        raise PromptFileError(
            path, line, "control_prompt", f"must be the prompt with {word!r} replaced: {expected!r}"
        )
    if row["word_last"] and not prompt.endswith(" " + word):
        raise PromptFileError(path, line, "word_last", f"prompt does not end with {word!r}")


def _check_ambiguous_pairs(path: Path, rows: list[dict[str, Any]], lines: list[int]) -> None:
    """Each pair_id holds exactly one ctx1 and one ctx2 row sharing word, word_last and
    control_word (the control compares one unambiguous word across the two frames)."""
    first: dict[str, tuple[int, dict[str, Any]]] = {}
    senses: dict[str, set[str]] = {}
    for line, row in zip(lines, rows, strict=True):
        pid = row["pair_id"]
        if pid in first:
            ref = first[pid][1]
            for field in ("word", "word_last", "control_word"):
                if row[field] != ref[field]:
                    raise PromptFileError(
                        path, line, field, f"differs from pair {pid!r} at line {first[pid][0]}"
                    )
            if row["sense"] in senses[pid]:
                raise PromptFileError(path, line, "sense", f"pair {pid!r} repeats {row['sense']}")
        else:
            first[pid] = (line, row)
            senses[pid] = set()
        senses[pid].add(row["sense"])
    for pid, got in senses.items():
        if got != set(_SENSES):
            raise PromptFileError(path, first[pid][0], "pair_id", f"pair {pid!r} lacks a sense")


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # C0 controls but tab, LF, CR


def _parse_line(path: Path, line: int, raw_bytes: bytes) -> dict[str, Any] | None:
    """The JSON object on line ``line`` of ``path`` (None for a blank line); a
    :class:`PromptFileError` for bytes that are not UTF-8, malformed JSON or a non-object."""
    try:
        raw = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PromptFileError(
            path, line, None, f"not valid UTF-8 (byte {err.start + 1} of the line)"
        ) from err
    if line == 1 and raw.startswith("\ufeff"):  # a UTF-8 byte-order mark (Windows editors)
        raw = raw[1:]
    if not raw.strip():
        return None
    try:
        row = json.loads(raw)
    except json.JSONDecodeError as err:
        raise PromptFileError(
            path, line, None, f"malformed JSON: {err.msg} (column {err.colno})"
        ) from err
    except RecursionError:  # thousands of nested brackets
        raise PromptFileError(path, line, None, "JSON nested too deeply to be a prompt row") from None
    if not isinstance(row, dict):
        raise PromptFileError(path, line, None, f"expected an object, got {_type_name(row)}")
    for field, value in row.items():
        if isinstance(value, str) and _CONTROL.search(value):
            char = _CONTROL.search(value).group()  # type: ignore[union-attr]
            raise PromptFileError(
                path, line, str(field), f"holds the control character {char!r} (a NUL or "
                "other non-printing byte a tokenizer would read as text): remove it"
            )  # fmt: skip
    return row


def _row_family(path: Path, line: int, row: dict[str, Any], family: str | None) -> str:
    """The family of ``row``: ``family`` when the file's is known (a row naming another is an
    error), else the one its ``family`` field names (which must be in :data:`SCHEMAS`)."""
    if family is None:
        _check_type(path, line, "family", row.get("family"), str)
        if row["family"] not in SCHEMAS:
            raise PromptFileError(
                path,
                line,
                "family",
                f"unknown family {row['family']!r}; known: {list(SCHEMAS)}",
            )
        family = row["family"]
    if "family" in row and row["family"] != family:
        raise PromptFileError(
            path, line, "family", f"expected {family!r}, got {row['family']!r}: one file holds "
            "one family (put each family in its own file and pass them comma-separated)"
        )  # fmt: skip
    return family


def _check_row(
    path: Path, line: int, row: dict[str, Any], family: str, seen: dict[str, int]
) -> None:
    """Check one row against its family's schema: every field present with its type, an id
    not in ``seen`` (id -> first line; the row's id is added), the family's own row rules."""
    for field, kind in SCHEMAS[family].fields.items():
        if field not in row:
            raise PromptFileError(path, line, field, "missing required field")
        _check_type(path, line, field, row[field], kind)
    if row["id"] in seen:
        raise PromptFileError(
            path,
            line,
            "id",
            f"duplicate id {row['id']!r} (first at line {seen[row['id']]})",
        )
    seen[row["id"]] = line
    if family == "ambiguous":
        _check_ambiguous_row(path, line, row)
    if family == "perturbations" and row["perturbed"] == row["prompt"]:
        raise PromptFileError(path, line, "perturbed", "identical to the prompt")


def load_prompts(path_or_family: str | os.PathLike[str]) -> pd.DataFrame:
    """Load and validate one prompt family.

    path_or_family: a family name from :func:`list_families` (read from :func:`prompts_dir`)
    or a path to a JSONL file. A file named after a family uses that family's schema; any other
    file uses the schema named by its rows' ``family`` field.

    Returns one row per prompt, columns in schema order followed by any extra fields;
    ``df.attrs`` holds ``family`` and ``path``. Raises :class:`PromptFileError` for malformed
    JSON, a missing field, a wrong type, an empty string, a duplicate id or a family mismatch.
    """
    path, family = _resolve(path_or_family)
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    seen: dict[str, int] = {}
    with open(path, "rb") as handle:
        for line, raw_bytes in enumerate(handle, start=1):
            row = _parse_line(path, line, raw_bytes)
            if row is None:
                continue
            family = _row_family(path, line, row, family)
            _check_row(path, line, row, family, seen)
            rows.append(row)
            lines.append(line)
    if not rows:
        raise PromptFileError(path, None, None, "file holds no prompts")
    assert family is not None
    if family == "ambiguous":
        _check_ambiguous_pairs(path, rows, lines)
    columns = list(SCHEMAS[family].fields)
    extras = sorted({k for row in rows for k in row} - set(columns))
    frame = pd.DataFrame(rows, columns=columns + extras)
    frame.attrs["family"] = family
    frame.attrs["path"] = str(path)
    return frame


def prompt_sources(text: str) -> list[str]:
    """The prompt files or family names a ``prompts`` parameter names: the whole text when it
    is an existing file (a name may hold a comma), else its comma-separated parts, stripped."""
    if Path(text).expanduser().is_file():
        return [text]
    return [part.strip() for part in text.split(",") if part.strip()]


def prompt_files(text: str) -> list[Path]:
    """The files a ``prompts`` parameter value reads, in order: each part of
    :func:`prompt_sources` resolved as :func:`load_prompts` resolves it (a family name to
    ``<prompts_dir>/<family>.jsonl``, anything else as a path). This is the one resolution
    that both a run (through :func:`load_prompts`) and the reuse key use. Raises
    :class:`PromptFileError` naming a part that is neither a family nor a file."""
    return [_resolve(part)[0] for part in prompt_sources(text)]


def load_prompt_files(sources: list[str]) -> pd.DataFrame:
    """Several prompt files or families (:func:`load_prompts` each), concatenated. Prompt ids
    are the resampling units of the claims, so an id in two files is refused
    (:class:`PromptFileError` naming both files and the line of the second), like a duplicate
    within one file; so is a file named twice. ``attrs["paths"]`` lists the files read."""
    frames: list[pd.DataFrame] = []
    first: dict[str, str] = {}
    paths: list[str] = []
    for src in sources:
        frame = load_prompts(src)
        path = frame.attrs["path"]
        if path in paths:
            raise PromptFileError(path, None, None, "named twice among the prompt files")
        for i, pid in enumerate(frame["id"]):
            if pid in first:
                raise PromptFileError(
                    path, None, "id", f"id {pid!r} (row {i + 1}) is also in {first[pid]}: ids "
                    "are the resampling units, so each prompt id must be unique across files"
                )  # fmt: skip
            first[pid] = path
        frames.append(frame)
        paths.append(path)
    if not frames:
        raise PromptFileError("(none)", None, None, "no prompt file or family given")
    table = pd.concat(frames, ignore_index=True)
    table.attrs["paths"] = paths
    return table


def bifurcation_prompts(table: pd.DataFrame) -> pd.DataFrame:
    """Long table of the texts to run: for each ambiguous row, the homograph prompt
    (``role="ambiguous"``) and its matched control (``role="control"``), with pair_id, sense
    and word_last kept."""
    keep = ["pair_id", "sense", "word", "word_last"]
    amb = table[keep + ["prompt"]].assign(role="ambiguous")
    ctl = table[keep + ["control_prompt"]].rename(columns={"control_prompt": "prompt"})
    return pd.concat([amb, ctl.assign(role="control")], ignore_index=True)
