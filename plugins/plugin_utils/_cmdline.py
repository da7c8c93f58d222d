"""argv rendering with the recipes site's semantics: flag dedupe, shell quoting, command layout.

Private to the vllm_fleet.recipes collection: not a public API.

The recipes site prints every process twice: as an argv list and as a
``vllm serve`` command with one flag (and its value) per continuation line.
Both come from the same deduplicated argv, in which the last occurrence of a
flag wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import text, truthy

_SAFE_SHELL_WORD = re.compile(r"^[A-Za-z0-9_./=:@,+%-]+$")
_SHELL_VARIABLE = re.compile(r"^\$[A-Z_][A-Z0-9_]*$")
_CONTINUATION = " \\\n  "


def dedupe_flags(args: list[Any]) -> list[Any]:
    """Keep the last occurrence of every flag (with its value), like a shell would.

    A flag takes the next token as its value unless that token is a flag too.
    """
    return list(dedupe_kept(args))


def kept_tokens(args: Iterable[Any]) -> list[Any]:
    """The tokens that survive into the argv: empty and falsy tokens are dropped."""
    return [a for a in args if (a if isinstance(a, str) else truthy(a))]


def _all_strings(words: list[Any]) -> bool:
    """True when every token is a string: one C-level join instead of a type check per token."""
    try:
        "".join(words)
    except TypeError:
        return False
    return True


def dedupe_kept(args: list[Any]) -> list[Any]:
    """``dedupe_flags`` for a fresh ``kept_tokens`` list: ``args`` itself when no flag repeats (the common case)."""
    if _all_strings(args):
        flags = [word for word in args if word[:1] == "-"]
    else:
        flags = [word for word in args if isinstance(word, str) and word[:1] == "-"]
    if len(flags) == len(set(flags)):
        return args
    return _drop_overridden_flags(args)


def _drop_overridden_strings(args: list[str]) -> list[str]:
    """``_drop_overridden_flags`` of an all-string argv, without the unit table."""
    last = {word: index for index, word in enumerate(args) if word[:1] == "-"}
    out: list[str] = []
    append = out.append
    keep = True  # whether the current flag (and so its value) survives
    after_flag = False
    for index, word in enumerate(args):
        if word[:1] == "-":
            keep = last[word] == index
            if keep:
                append(word)
            after_flag = True
        elif after_flag:
            if keep:
                append(word)
            after_flag = False
        else:
            append(word)
    return out


def _drop_overridden_flags(args: list[Any]) -> list[Any]:
    units: list[tuple[Any, int, int]] = []  # (flag or None, start, end)
    count = len(args)
    i = 0
    while i < count:
        current = args[i]
        if isinstance(current, str) and current[:1] == "-":
            end = i + 1
            if end < count:
                nxt = args[end]
                if not (isinstance(nxt, str) and nxt[:1] == "-"):
                    end += 1
            units.append((current, i, end))
            i = end
        else:
            units.append((None, i, i + 1))
            i += 1
    last = {flag: index for index, (flag, _start, _end) in enumerate(units) if flag is not None}
    out: list[Any] = []
    for index, (flag, start, end) in enumerate(units):
        if flag is None or last[flag] == index:
            out.extend(args[start:end])
    return out


@lru_cache(maxsize=16384)
def _quoted(word: str) -> str:
    if _SHELL_VARIABLE.match(word) or _SAFE_SHELL_WORD.match(word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def shell_quote(word: Any) -> Any:
    """Single-quote a word unless it is shell-safe or a bare ``$VARIABLE``."""
    if not isinstance(word, str) or word == "":
        return word
    return _quoted(word)


def final_args(args: Iterable[Any]) -> list[Any]:
    """Drop empty tokens, then dedupe flags: the argv that is actually run."""
    return dedupe_kept(kept_tokens(args))


def _non_string(token: Any) -> TypeError:
    return TypeError(f"argv contains a non-string token {token!r}; every token must be a string")


def format_command(model_id: Any, args: list[Any], *, final: bool = False) -> str:
    """The recipes site's layout: one flag and its value per continuation line."""
    words = args if final else final_args(args)
    if words and not _all_strings(words):
        raise _non_string(next(word for word in words if not isinstance(word, str)))
    return _laid_out(model_id, words)


#: Text pieces of the command layout, per word: a flag (or positional) on its own continuation
#: line, and a value after its flag. Bounded: cleared when full.
_LINE_PIECES: dict[str, str] = {}
_VALUE_PIECES: dict[str, str] = {}
_PIECES_SIZE = 65536


def clear_pieces() -> None:
    """Drop the memoised layout pieces and quoted words."""
    _LINE_PIECES.clear()
    _VALUE_PIECES.clear()
    _quoted.cache_clear()


def _laid_out(model_id: Any, words: list[str]) -> str:
    """``format_command`` of an all-string argv."""
    lines, values = _LINE_PIECES, _VALUE_PIECES
    if len(lines) > _PIECES_SIZE or len(values) > _PIECES_SIZE:
        lines.clear()
        values.clear()
    parts = ["vllm serve " + text(model_id)]
    append = parts.append
    after_flag = False  # a value right after a flag shares its line
    for word in words:
        if after_flag and word[:1] != "-":
            piece = values.get(word)
            if piece is None:
                piece = values[word] = " " + _quoted(word) if word else " "
            after_flag = False
        else:
            piece = lines.get(word)
            if piece is None:
                piece = lines[word] = _CONTINUATION + word
            after_flag = word[:1] == "-"
        append(piece)
    return "".join(parts)


def render_kept(model_id: Any, args: list[Any]) -> tuple[str, list[Any]]:
    """(command, argv) of a fresh ``kept_tokens`` argv: ``format_command`` and ``format_argv`` of its dedupe.

    The common all-string argv is deduplicated and laid out without a second type check.
    """
    if not _all_strings(args):
        words = dedupe_kept(args)
        return format_command(model_id, words, final=True), format_argv(model_id, words, final=True)
    flags = [word for word in args if word[:1] == "-"]
    words = args if len(flags) == len(set(flags)) else _drop_overridden_strings(args)
    return _laid_out(model_id, words), ["vllm", "serve", model_id, *words]


def format_argv(model_id: Any, args: list[Any], *, final: bool = False) -> list[Any]:
    return ["vllm", "serve", model_id, *(args if final else final_args(args))]
