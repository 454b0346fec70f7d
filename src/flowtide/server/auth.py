"""Who may change things: bearer tokens, each with a name (recorded with the signals and
cancels it sends). Without any token the server is read-only."""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request

from flowtide.server.errors import ApiError

__all__ = ["TOKEN_VARIABLE", "TokenFileError", "Tokens", "load_tokens", "writer"]

TOKEN_VARIABLE = "FLOWTIDE_API_TOKEN"
"""The environment variable whose value is the one token named ``default``."""


class TokenFileError(ValueError):
    """A token file that cannot be read (its message names the file and line, never a token)."""


@dataclass(frozen=True)
class Tokens:
    """The tokens the server takes, by name."""

    by_name: Mapping[str, str]

    @property
    def read_only(self) -> bool:
        return not self.by_name

    def name_of(self, given: str) -> str | None:
        """The name of the token ``given`` is, or None. Every token is compared, in constant
        time each, so the answer's timing tells nothing of which one matched."""
        found = None
        offered = given.encode()
        for name, token in self.by_name.items():
            if hmac.compare_digest(offered, token.encode()):
                found = name
        return found


def load_tokens(token_file: Path | None, environ: Mapping[str, str] = os.environ) -> Tokens:
    """The tokens of ``token_file`` (lines ``name:token``; blank lines and ``#`` comments
    skipped), else the one of ``FLOWTIDE_API_TOKEN``, else none."""
    if token_file is None:
        token = environ.get(TOKEN_VARIABLE, "").strip()
        return Tokens({"default": token} if token else {})
    try:
        lines = token_file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise TokenFileError(f"{token_file}: cannot read the token file ({reason})") from None
    found: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, colon, token = text.partition(":")
        name, token = name.strip(), token.strip()
        where = f"{token_file}:{number}"
        if not colon or not name or not token:
            raise TokenFileError(f"{where}: expected 'name:token'")
        if name in found:
            raise TokenFileError(f"{where}: the name {name!r} is given twice")
        found[name] = token
    if not found:
        raise TokenFileError(f"{token_file}: no token in the file")
    return Tokens(found)


def writer(request: Request) -> str:
    """The name of the token the request carries; 403 on a read-only server, 401 without a
    token or with a wrong one (the answer never repeats what was sent)."""
    tokens: Tokens = request.app.state.tokens
    if tokens.read_only:
        raise ApiError(
            403, "read_only", f"this server is read-only: start it with {TOKEN_VARIABLE} set"
        )
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise ApiError(401, "unauthorized", "this needs 'Authorization: Bearer <token>'")
    name = tokens.name_of(given.strip())
    if name is None:
        raise ApiError(401, "unauthorized", "the bearer token is not one this server takes")
    return name
