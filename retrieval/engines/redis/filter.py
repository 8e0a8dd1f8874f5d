"""Redis filtered search: attributes as hash fields, filters as RediSearch hybrid queries.

Not a backend module (the backend is :mod:`retrieval.engines.redis.index`, which mixes
:class:`RedisFilter` in). An integer attribute ``x`` becomes a ``NUMERIC`` field ``a_x``, a
label attribute a ``TAG`` field ``a_x`` (``SEPARATOR`` U+001F, ``CASESENSITIVE``; a row's labels
are joined with the separator in its hash). Predicates render to the query prefix of a KNN
query: ``@a_x:{earn|grain}`` (label eq / in; every ASCII character of a value other than a
letter or digit is escaped with a backslash, other characters are written as themselves),
``@a_x:[lo hi]`` (inclusive range), ``(@a_x:[v v] | @a_x:[w w])`` (int eq / in); several
predicates are ANDed (space) inside one group, as
``(@a_topics:{earn|grain} @a_year:[1990 1995])=>[KNN $K @v $BLOB EF_RUNTIME $EF AS d]``.
Vector, k, ef and batch size travel as ``PARAMS``.

What a TAG field holds is not always the label (checked on a real Redis 8.2 + RediSearch):
Redis trims leading and trailing ASCII whitespace from each tag and cuts it at U+0000, so the
query asks for that stored form (`` lead`` is found as ``lead``); a label whose stored form is
blank, equals another label's, or holds an ASCII control character other than whitespace
(no query syntax matches those, escaped or not) cannot be filtered on faithfully:
:func:`check_filter` refuses it in one line before anything is measured.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from retrieval.errors import ConfigError, DataError
from retrieval.filtering.attrs import Attributes, LabelColumn
from retrieval.filtering.rows import RowFilter
from retrieval.filtering.spec import Where
from retrieval.indexes.filter_common import InProcessFilter

WHERE = "backend 'redis'"
#: TAG separator between a row's labels (a label holding it is refused)
SEPARATOR = "\x1f"
#: Redis NUMERIC fields are doubles: integers beyond 2**53 would compare inexactly
INT_LIMIT = 2**53
_SAFE = re.compile(r"[^A-Za-z0-9_]")
#: ASCII characters other than letters and digits: escaped with a backslash inside ``{...}``
#: (an escaped non-ASCII character no longer matches, so those are written as themselves)
_TAG_SPECIAL = re.compile(r"([\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f])")
#: what Redis trims from both ends of a tag when it indexes it
TAG_TRIMMED = " \t\n\v\f\r"
#: ASCII control characters no query matches (whitespace aside; U+001F is the separator)
_UNMATCHABLE = re.compile(r"[\x01-\x08\x0e-\x1e\x7f]")


def field_name(attr: str) -> str:
    """The Redis field of attribute ``attr`` (letters, digits and _ only)."""
    return "a_" + _SAFE.sub("_", attr)


def escape_tag(value: str) -> str:
    """``value`` as a literal inside ``@f:{...}``: a backslash before each ASCII character
    other than a letter or digit (TAG syntax ``,.<>{}[]"':;!@#$%^&*()-+=~|/``, ``_``,
    whitespace); non-ASCII characters as themselves."""
    return _TAG_SPECIAL.sub(r"\\\1", value)


def stored_tag(label: str) -> str:
    """The tag Redis indexes for ``label``: cut at U+0000, ASCII whitespace trimmed."""
    return label.split("\0", 1)[0].strip(TAG_TRIMMED)


@functools.lru_cache(maxsize=16)
def _stored_forms(col: LabelColumn) -> dict[str, list[str]]:
    """Stored tag -> the labels of ``col`` Redis indexes as it."""
    out: dict[str, list[str]] = {}
    for label in col.vocab:
        out.setdefault(stored_tag(label), []).append(label)
    return out


def tag_refusal(label: str, col: LabelColumn) -> str | None:
    """Why Redis cannot filter on ``label`` of ``col`` faithfully (None when it can)."""
    bad = _UNMATCHABLE.search(label)
    if bad is not None:
        return (f"it holds control character U+{ord(bad.group(0)):04X}, which no RediSearch "
                f"query matches")
    if SEPARATOR in label:
        return "it holds U+001F, the TAG separator"
    tag = stored_tag(label)
    if not tag:
        return "it is blank once Redis trims whitespace (and cuts at U+0000) from the tag"
    same = [x for x in _stored_forms(col).get(tag, []) if x != label]
    if same:
        return (f"Redis trims whitespace (and cuts at U+0000) from tags, so it and label "
                f"{same[0]!r} are the same tag {tag!r}")
    return None


def check_filter(where: Where, attrs: Attributes) -> None:
    """ConfigError (one line, naming the label and why) for a label filter Redis cannot
    answer faithfully; nothing for the other predicates."""
    if where.attr not in attrs.labels:
        return
    col = attrs.labels[where.attr]
    for v in where.values:
        why = tag_refusal(str(v), col)
        if why is not None:
            raise ConfigError(f"{WHERE} cannot filter attribute '{where.attr}' on label "
                              f"{str(v)!r}: {why}; rename the label or use strategy "
                              f"prefilter / postfilter for this backend")


def predicate(where: Where, attrs: Attributes) -> str:
    """The RediSearch query term of one predicate (attribute kinds from ``attrs``)."""
    f = field_name(where.attr)
    if attrs.kind(where.attr) == "label":
        tags = (escape_tag(stored_tag(str(v))) for v in where.values)
        return f"@{f}:{{{'|'.join(tags)}}}"
    if where.range is not None:
        return f"@{f}:[{int(where.range[0])} {int(where.range[1])}]"
    terms = [f"@{f}:[{int(v)} {int(v)}]" for v in where.values]
    return terms[0] if len(terms) == 1 else f"({' | '.join(terms)})"


def query_filter(wheres: Sequence[Where], attrs: Attributes) -> str:
    """The hybrid query prefix ``(p1 p2 ...)``: every predicate must hold (AND)."""
    return f"({' '.join(predicate(w, attrs) for w in wheres)})"


def schema_fields(attrs: Attributes) -> list[Any]:
    """``FT.CREATE ... SCHEMA`` entries of the attribute fields (after the vector field)."""
    out: list[Any] = []
    for name in attrs.ints:
        out += [field_name(name), "NUMERIC"]
    for name in attrs.labels:
        out += [field_name(name), "TAG", "SEPARATOR", SEPARATOR, "CASESENSITIVE"]
    return out


def check_attributes(attrs: Attributes) -> None:
    """DataError (one line) for attributes Redis cannot hold faithfully."""
    fields: dict[str, str] = {}
    for name in attrs.names:
        f = field_name(name)
        if f in fields:
            raise DataError(f"{WHERE}: attributes '{fields[f]}' and '{name}' map to the same "
                            f"Redis field '{f}' (letters, digits and _ are kept); rename one")
        fields[f] = name
    for name, col in attrs.ints.items():
        if col.size and int(np.abs(col).max()) > INT_LIMIT:
            raise DataError(f"{WHERE}: attribute '{name}': integers must lie within "
                            f"+-2**53 (Redis NUMERIC is a double); received "
                            f"{int(np.abs(col).max())}")
    for name, lab in attrs.labels.items():
        bad = next((v for v in lab.vocab if SEPARATOR in v), None)
        if bad is not None:
            raise DataError(f"{WHERE}: attribute '{name}': labels must not hold U+001F (the "
                            f"TAG separator); received {bad!r}")


def hash_fields(attrs: Attributes, row: int) -> dict[str, Any]:
    """The attribute values of build row ``row``, as written into its hash."""
    out: dict[str, Any] = {field_name(n): int(c[row]) for n, c in attrs.ints.items()}
    for name, col in attrs.labels.items():
        labels = col.row(row)
        if labels:  # a row without labels has no field: it matches no label filter
            out[field_name(name)] = SEPARATOR.join(labels)
    return out


class RedisFilter(InProcessFilter):
    """Mixin for :class:`retrieval.engines.redis.index.RedisIndex` (SupportsFilter): the row
    checks of :class:`InProcessFilter`, attributes stored in Redis, filters rendered by
    :func:`query_filter`."""

    _attrs: Attributes | None = None
    #: the attributes the current index was built with (None: unfiltered build)
    _built_attrs: Attributes | None = None
    name: ClassVar[str]

    @staticmethod
    def check_filter(where: Where, attrs: Attributes) -> None:
        """Refuse a filter Redis cannot answer faithfully (see :func:`check_filter`)."""
        check_filter(where, attrs)

    def attach_attributes(self, attrs: Attributes) -> None:
        """Store ``attrs`` as NUMERIC / TAG fields at the next build."""
        check_attributes(attrs)
        self._attrs = attrs

    def _build_attrs(self, n: int) -> Attributes | None:
        """The attributes to write in a build of ``n`` rows (checked)."""
        a = self._attrs
        if a is not None and a.n != n:
            raise DataError(f"{WHERE}: attributes have {a.n} rows for {n} vectors (one value "
                            f"per vector is required)")
        return a

    def _filtered(self, x: np.ndarray, k: int, flt: RowFilter) -> tuple[np.ndarray, np.ndarray]:
        attrs = self._built_attrs
        if attrs is None:
            raise ConfigError(f"{WHERE}: filtered search needs attach_attributes() before "
                              f"build()")
        if flt.where.attr not in attrs.names:
            raise ConfigError(f"{WHERE}: filter attribute '{flt.where.attr}' is not stored in "
                              f"this index; stored: {', '.join(attrs.names) or 'none'}")
        check_filter(flt.where, attrs)
        return self._knn(x, k, query_filter([flt.where], attrs))  # type: ignore[attr-defined]
