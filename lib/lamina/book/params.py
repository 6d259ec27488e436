"""A chapter's papermill parameters: read from its ``parameters`` cell, parsed, type-checked
and resolved before anything runs.

``python -m lamina.book execute CH -p NAME VALUE`` hands VALUE over as text. It is read as a
Python literal (``3``, ``0.5``, ``False``, ``None``, ``[1, 2]``, ``'text'``), or as JSON
(``true``, ``null``), or else kept as the text itself; then checked against the type of the
parameter's default in the chapter's ``parameters`` cell. Path-like values are resolved
against the caller's working directory, because papermill runs the notebook in
``notebooks/``. An unknown name is an error that suggests the closest known one.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
from pathlib import Path
from typing import Any

from lamina.sources.prompts import prompt_sources
from lamina.states.runs import parameters_cell

__all__ = [
    "ParameterError",
    "chapter_defaults",
    "check_parameters",
    "cli_parameters",
    "parse_cli_value",
    "parse_literal",
]

# parameters that are always filesystem paths (when not None)
PATH_PARAMETERS = ("results_root", "peer_root")
# parameters naming a model: a local folder when one exists (relative to the caller's cwd),
# else a hub name, an alias or an organism spec
MODEL_PARAMETERS = ("model", "target", "base", "corpus", "real_models", "reference_models")
# names lamina resolves itself, never folders
_RESERVED = ("default", "minilm", "micro", "peer-gpt2")


class ParameterError(ValueError):
    """A chapter parameter that is unknown, of the wrong type, or an unusable path."""


def chapter_defaults(source: str | os.PathLike) -> dict[str, Any]:
    """``{name: default}`` from the ``parameters`` cell of the jupytext chapter ``source``
    (:func:`lamina.states.runs.parameters_cell`). A default that is not a literal maps to
    ``...`` (its type is then not checked)."""
    try:
        return parameters_cell(source)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None


def parse_literal(text: str) -> Any:
    """``text`` as a Python literal, else as JSON, else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        return json.loads(text)
    except ValueError:
        return text


def _str_list(value: Any) -> bool:
    return (
        isinstance(value, list | tuple) and bool(value) and all(isinstance(x, str) for x in value)
    )


def parse_cli_value(text: str, default: Any, name: str = "") -> Any:
    """A command-line value for parameter ``name`` whose default is ``default``: a str
    parameter keeps the text as given (``-p model 7`` is the name "7"; a model parameter also
    takes a list of names, ``-p model '["a", "b"]'``); any other is :func:`parse_literal`."""
    if isinstance(default, str):
        value = parse_literal(text)
        if isinstance(value, str) or (name in MODEL_PARAMETERS and _str_list(value)):
            return value
        return text
    return parse_literal(text)


def _type_word(value: Any) -> str:
    if isinstance(value, bool):
        return "True or False"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list, e.g. [1, 2]"
    if isinstance(value, dict):
        return "a dict"
    return type(value).__name__


def _check_type(chapter: str, name: str, value: Any, default: Any) -> Any:
    """``value`` converted to its default's type where that is lossless, else ParameterError.
    A model parameter with a str default also takes a list of names."""
    if default is None or default is ...:
        return value
    if isinstance(default, str) and name in MODEL_PARAMETERS and _str_list(value):
        return list(value)
    ok: bool
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, list | tuple):
        ok = isinstance(value, list | tuple)
        if ok:
            value = list(value)
            kinds = {type(x) for x in default}
            if len(kinds) == 1:
                kind = kinds.pop()
                ok = all(
                    isinstance(x, kind) and isinstance(x, bool) == (kind is bool) for x in value
                )
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ParameterError(
            f"chapter {chapter!r}: parameter {name!r} expects {_type_word(default)} (its "
            f"default is {default!r}); got {value!r} ({type(value).__name__})"
        )
    return value


def _absolute(value: str, cwd: Path) -> str:
    return str((cwd / Path(value).expanduser()).resolve())


def _looks_like_path(value: str) -> bool:
    return value.startswith(("./", "../", "~", "/")) or value in (".", "..")


def _resolve_model(chapter: str, name: str, value: Any, cwd: Path) -> Any:
    if not isinstance(value, str) or value in _RESERVED or value.startswith("organism-"):
        return value
    if name == "model" and value.rstrip("/").rsplit("/", 1)[-1] in ("", ".", ".."):
        raise ParameterError(
            f"chapter {chapter!r}: model {value!r} is not a usable model name: the output "
            "folder is named after the model. Name the folder itself, e.g. ../my-model"
        )
    base = value.rsplit("+", 1)[0] if not (cwd / value).expanduser().exists() else value
    local = (cwd / value).expanduser().is_dir() or (cwd / value).expanduser().is_file()
    if local or _looks_like_path(value) or base.lower().endswith(".gguf"):
        if base != value and not local:  # "<path>+Q4_1": resolve the path, keep the suffix
            return _absolute(base, cwd) + value[len(base) :]
        return _absolute(value, cwd)
    return value


def _resolve_prompts(value: Any, cwd: Path) -> Any:
    """A ``prompts`` value with its files made absolute: the whole value when it names a file
    (whose name may hold a comma), else each comma-separated part that is a path."""
    if not isinstance(value, str):
        return value
    if (cwd / value).expanduser().is_file():
        return _absolute(value, cwd)
    out = []
    for p in prompt_sources(value):
        is_path = (cwd / p).expanduser().is_file() or os.sep in p or p.endswith(".jsonl")
        out.append(_absolute(p, cwd) if is_path else p)
    return ",".join(out)


def check_parameters(
    chapter: str,
    source: str | os.PathLike,
    parameters: dict[str, Any],
    *,
    cwd: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """``parameters`` for the chapter at ``source``, checked and with paths made absolute.

    Raises :class:`ParameterError` for a name the chapter's parameters cell does not define
    (suggesting the closest), a value whose type differs from its default's (an int for a
    float is fine; a default of None accepts anything), and ``.``/``..`` as a model name.
    Relative paths in ``results_root``, ``peer_root``, ``prompts`` and local model folders
    (``model``, ``target``, ``base``, ``corpus``) are resolved against ``cwd`` (default: the
    caller's working directory).
    """
    defaults = chapter_defaults(source)
    here = Path(cwd) if cwd is not None else Path.cwd()
    out: dict[str, Any] = {}
    for name, value in parameters.items():
        if name not in defaults:
            close = difflib.get_close_matches(name, list(defaults), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ParameterError(
                f"chapter {chapter!r} has no parameter {name!r}{hint} Its parameters: "
                f"{sorted(defaults)}"
            )
        value = _check_type(chapter, name, value, defaults[name])
        if name == "seed" and isinstance(value, int) and not 0 <= value < 2**32:
            raise ParameterError(
                f"chapter {chapter!r}: seed {value!r} must be a whole number in [0, 2**32)"
            )
        if name in PATH_PARAMETERS and isinstance(value, str | os.PathLike):
            value = _absolute(str(value), here)
            if Path(value).exists() and not Path(value).is_dir():
                raise ParameterError(
                    f"chapter {chapter!r}: {name} {value!r} is a file; it must name a folder"
                )
        elif name in MODEL_PARAMETERS and isinstance(value, list):
            value = [_resolve_model(chapter, name, v, here) for v in value]
        elif name in MODEL_PARAMETERS:
            value = _resolve_model(chapter, name, value, here)
        elif name == "prompts":
            value = _resolve_prompts(value, here)
        out[name] = value
    return out


def cli_parameters(
    chapters: list[str], pairs: list[list[str]], notebooks: Path
) -> dict[str, dict[str, Any]]:
    """Each chapter's ``-p NAME VALUE`` parameters, parsed against the parameters cell of
    ``<notebooks>/<chapter>.py`` and checked. A name no chapter defines raises ParameterError
    (with the closest name); a name only some of them define goes to those."""
    sources = {c: notebooks / f"{c}.py" for c in chapters}
    for c, src in sources.items():
        if not src.is_file():
            known = sorted(p.stem for p in notebooks.glob("*.py"))
            raise ParameterError(f"unknown chapter {c!r}; chapters: {known}")
    defaults = {c: chapter_defaults(src) for c, src in sources.items()}
    known = sorted({n for d in defaults.values() for n in d})
    for name, _ in pairs:
        if not any(name in d for d in defaults.values()):
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ParameterError(
                f"no chapter among {chapters} has a parameter {name!r}{hint} Parameters: {known}"
            )
    out = {}
    for c in chapters:
        raw = {n: parse_cli_value(v, defaults[c][n], n) for n, v in pairs if n in defaults[c]}
        out[c] = check_parameters(c, sources[c], raw)
    return out
