"""What every chapter's config shares: quick-mode caps written once, serialisation, and the
one entry point that builds a config from parameters and rejects unknown ones.

A chapter config is a dataclass that subclasses :class:`ChapterConfig` (which declares the
``quick`` field every chapter has), declares its own quick-mode caps in ``QUICK`` (field ->
value: a number caps the field at that value, anything else replaces it), and calls
``self.apply_quick()`` at the end of its own checks in ``__post_init__``. The caps every chapter shares, on its resampling counts
(:data:`RESAMPLING_QUICK`), are written here once and apply to any config with those fields.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Self, TypeVar, cast

from lamina.core.registry import by_name

T = TypeVar("T")

__all__ = [
    "RESAMPLING_QUICK",
    "ChapterConfig",
    "UnknownParameterError",
    "as_list",
    "check_parameters",
    "default_models",
]

_IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})
_PLAIN = (type(None), bool, int, float, str, list, tuple, dict)

#: quick-mode caps of the resampling counts, for every config that has these fields: bootstrap
#: resamples (95% CIs) and label permutations (null distributions).
RESAMPLING_QUICK: Mapping[str, int] = {"n_bootstrap": 200, "n_permutations": 20}


def default_models(chapter: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(pretrained models, organisms) that ``model="default"`` runs for ``chapter``: its
    :class:`lamina.core.registry.ChapterRecord`'s ``default_models`` split into the
    ``organism-*`` names and the others, each in the record's order (the one list of a
    chapter's default models; KeyError for an unknown chapter)."""
    names = by_name(chapter).default_models
    organisms = tuple(n for n in names if n.startswith("organism-"))
    return tuple(n for n in names if n not in organisms), organisms


def as_list(value: T | Iterable[T], single: type[T]) -> list[T]:
    """A list field given as one value or many (papermill may pass one seed or one name):
    ``[value]`` when ``value`` is an instance of ``single``, else ``list(value)``."""
    return [value] if isinstance(value, single) else list(cast(Iterable[T], value))


class UnknownParameterError(TypeError):
    """A parameter that the chapter's config does not have (the message names the closest)."""


def check_parameters(names: Iterable[str], valid: Iterable[str], where: str) -> None:
    """Raise :class:`UnknownParameterError` for the first name in ``names`` that is not in
    ``valid``, naming the closest valid one (``difflib``) and listing them all."""
    valid = sorted(valid)
    for name in names:
        if name in valid:
            continue
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UnknownParameterError(
            f"{where} has no parameter {name!r}; {hint}valid parameters: {', '.join(valid)}"
        )


@dataclasses.dataclass
class ChapterConfig:
    """Base of the chapter configs (dataclasses): the ``quick`` field, :meth:`from_params`,
    :meth:`apply_quick`, :meth:`to_dict`.

    quick: small samples and budgets, for tests and CI (the caps of :meth:`quick_caps`).
    """

    QUICK: ClassVar[Mapping[str, Any]] = {}
    #: notebook parameters that are not config fields (where the notebook writes its results)
    NOTEBOOK_ONLY: ClassVar[tuple[str, ...]] = ("results_root",)
    quick: bool = False

    @classmethod
    def from_globals(cls, namespace: Mapping[str, Any]) -> Self:
        """The config of a notebook's parameters: ``config = Config.from_globals(globals())``,
        called before anything else defines a global. Every plain-data global (None, bool,
        number, text, list, tuple, dict; not a module, class, function, IPython name or
        ``_name``) is a parameter, except :attr:`NOTEBOOK_ONLY`; so a mistyped papermill
        parameter, which papermill injects as a new global, raises
        :class:`UnknownParameterError` naming the closest field instead of being ignored."""
        params = {
            k: v
            for k, v in namespace.items()
            if not k.startswith("_")
            and k not in _IPYTHON_NAMES
            and k not in cls.NOTEBOOK_ONLY
            and isinstance(v, _PLAIN)
        }
        return cls.from_params(params)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Self:
        """The config of these parameters; :class:`UnknownParameterError` names a parameter
        that is not a field (with the closest field), so a typo never falls back silently to
        the default."""
        check_parameters(params, cls.parameter_names(), cls.__name__)
        return cls(**params)

    @classmethod
    def parameter_names(cls) -> list[str]:
        """The fields a caller may set."""
        return [f.name for f in dataclasses.fields(cls) if f.init]

    def quick_caps(self) -> dict[str, Any]:
        """The quick-mode caps of this config: :data:`RESAMPLING_QUICK` for the fields it has,
        then its own ``QUICK`` (which wins where both name a field)."""
        shared = {k: v for k, v in RESAMPLING_QUICK.items() if k in self.parameter_names()}
        return shared | dict(self.QUICK)

    def apply_quick(self) -> None:
        """In quick mode, cap each field named in :meth:`quick_caps` (numbers: at most the cap;
        other values: replaced). Nothing happens outside quick mode."""
        if not self.quick:
            return
        for name, cap in self.quick_caps().items():
            value = getattr(self, name)
            number = isinstance(cap, int | float) and not isinstance(cap, bool)
            setattr(self, name, min(value, cap) if number and value is not None else cap)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain data (saved next to the results)."""
        return dataclasses.asdict(self)
