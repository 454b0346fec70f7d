"""JSON-LD contexts: processing a document's ``@context`` and expanding its keys and values.

The JSON-LD processing itself is pyld's, through its public API: this module keeps it offline
(remote contexts are served from memory or refused, never fetched), turns its errors into located
problems, and expands keys and values against a processed context as JSON-LD's IRI expansion
says (pyld keeps its own expansion private).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from pyld import jsonld
from pyld.context_resolver import ContextResolver
from pyld.iri_resolver import resolve

from flowtide.documents.vocabulary import LOCAL_CONTEXTS
from flowtide.errors import Problem

_PROCESSOR = jsonld.JsonLdProcessor()
_KEYWORDS = frozenset(jsonld.KEYWORDS)
_KEYWORD_LIKE = re.compile(jsonld.KEYWORD_PATTERN)
_ABSOLUTE_IRI = re.compile(r"^([A-Za-z][A-Za-z0-9+-.]*|_):[^\s]*$")


class RemoteContextRefused(Exception):
    """A document names a remote context Flowtide does not serve: nothing is fetched."""

    def __init__(self, url: str) -> None:
        self.url = url
        super().__init__(url)


class ContextError(Exception):
    """A ``@context`` pyld could not process, said as a problem at ``pointer``."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(problem.message)


def _load_local(url: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    context = LOCAL_CONTEXTS.get(url)
    if context is None:
        raise RemoteContextRefused(url)
    return {
        "contextUrl": None,
        "documentUrl": url,
        "document": {"@context": copy.deepcopy(context)},
    }


def _options() -> dict[str, Any]:
    return {
        "documentLoader": _load_local,
        "contextResolver": ContextResolver({}, _load_local),
        "base": "",
    }


class ActiveContext:
    """A processed ``@context``: expands terms, compact IRIs and keyword aliases to IRIs."""

    def __init__(self, state: Any) -> None:
        self._state = state

    @classmethod
    def initial(cls) -> ActiveContext:
        return cls(_PROCESSOR.process_context({}, None, _options()))  # no context: the initial

    def extend(self, local: Any, pointer: str) -> ActiveContext:
        """This context with ``local`` (found at ``pointer``) processed on top of it."""
        try:
            return ActiveContext(_PROCESSOR.process_context(self._state, local, _options()))
        except Exception as exc:  # pyld raises JsonLdError and, on odd input, anything
            raise ContextError(Problem(_describe(exc), pointer=pointer)) from None

    def key(self, key: str) -> str | None:
        """A key's absolute IRI or keyword; ``None`` when the context ignores it."""
        return self._expand(key, vocab=True)

    def type_iri(self, value: str) -> str | None:
        """A ``@type`` value's IRI (terms and ``@vocab`` apply)."""
        return self._expand(value, vocab=True)

    def iri(self, value: str) -> str:
        """An IRI-valued string: compact IRIs expand, ``@base`` applies, the rest stays."""
        base = "" if "@base" in self._state else None
        expanded = self._expand(value, vocab=False, base=base)
        return expanded if expanded is not None else value

    def _expand(self, value: str, *, vocab: bool, base: str | None = None) -> str | None:
        try:
            return expand_iri(self._state, value, vocab=vocab, base=base)
        except Exception:  # an IRI that cannot be resolved is taken as written
            return value


def expand_iri(context: Any, value: str, *, vocab: bool, base: str | None) -> str | None:
    """JSON-LD's IRI expansion of ``value`` against a processed ``context`` (as pyld returns it
    from ``process_context``): a keyword stays, a term gives its IRI (None for a term mapped to
    null, or for what looks like a keyword and is not one), a compact IRI expands by its prefix,
    an absolute IRI stays; else ``@vocab`` is prepended (``vocab``) or, given a ``base``, the
    context's ``@base`` resolves it."""
    if value in _KEYWORDS:
        return value
    if _KEYWORD_LIKE.match(value):
        return None
    mappings = context["mappings"]
    if vocab and value in mappings:
        term = mappings[value]
        return term["@id"] if term is not None else None
    prefix, colon, suffix = value.partition(":")
    if colon and prefix:
        if prefix == "_" or suffix.startswith("//"):
            return value  # a blank node, or an absolute IRI with an authority
        term = mappings.get(prefix)
        if term and term["_prefix"]:
            return str(term["@id"]) + suffix
        if _ABSOLUTE_IRI.match(value):
            return value
    if vocab and "@vocab" in context:
        return str(context["@vocab"]) + value
    if base is not None and "@base" in context:
        at = context["@base"]
        if at is None:
            return value
        return str(resolve(value, at if _ABSOLUTE_IRI.match(at) else resolve(at, base)))
    if base == "":
        return str(resolve(value, jsonld.DEFAULT_BASE_IRI))
    return str(resolve(value, base)) if base else value


def _describe(exc: BaseException) -> str:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, RemoteContextRefused):
            return (
                f"remote context {cause.url!r} is not served by Flowtide and is never fetched; "
                "put the context inline in the document"
            )
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, jsonld.JsonLdError):
        code = f" ({exc.code})" if exc.code else ""
        details = exc.args[0] if exc.args else "invalid @context"
        return f"invalid @context{code}: {details}"
    return f"invalid @context: {exc}"
