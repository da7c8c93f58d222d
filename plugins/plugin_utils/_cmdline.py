"""The recipes site's argv rules: flag dedupe, shell quoting and the command layout.

Private to the vllm_fleet.recipes collection: not a public API.

An argv is built from layers (model, variant, strategy, parallel layout,
overrides, hardware, features, KV connectors). Most layers depend only on the
recipe, variant, strategy and hardware, so they are compiled once into an
``ArgvSegment``: tokens with empty ones dropped, the flags they set, and their
share of the command text. Rendering a process then joins segments; tokens are
only walked again when a flag repeats and the last-wins dedupe must run.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable, Sequence

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import text, truthy

_SAFE_SHELL_WORD = re.compile(r"^[A-Za-z0-9_./=:@,+%-]+$")
_SHELL_VARIABLE = re.compile(r"^\$[A-Z_][A-Z0-9_]*$")
CONTINUATION = " \\\n  "


def dedupe_flags(args: list[Any]) -> list[Any]:
    """Keep the last occurrence of every flag (with its value), like a shell would.

    A flag takes the next token as its value unless that token is a flag too.
    """
    flags = [a for a in args if isinstance(a, str) and a[:1] == "-"]
    if len(flags) == len(set(flags)):
        return list(args)
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


def kept_tokens(args: Iterable[Any]) -> list[Any]:
    """The tokens the site keeps: non-empty strings and truthy non-strings."""
    return [a for a in args if (a if isinstance(a, str) else truthy(a))]


def final_args(args: Iterable[Any]) -> list[Any]:
    """Drop empty tokens, then dedupe flags: the argv that is actually run."""
    return dedupe_flags(kept_tokens(args))


def _non_string_error(words: Sequence[Any]) -> TypeError:
    bad = next((word for word in words if not isinstance(word, str)), None)
    return TypeError(f"argv contains a non-string token {bad!r}; every token must be a string")


def _joined(words: Sequence[str]) -> str:
    """Layout of ``words[1:]``: a token shares its predecessor's line exactly when the
    predecessor is a flag and the token is not (it is that flag's value, and only
    values are quoted)."""
    return "".join([
        " " + _quoted(word) if previous[:1] == "-" and word[:1] != "-" else CONTINUATION + word
        for previous, word in zip(words, words[1:])
    ])


def format_command(model_id: Any, args: list[Any], *, final: bool = False) -> str:
    """The recipes site's layout: one flag and its value per continuation line."""
    words = args if final else final_args(args)
    head = f"vllm serve {text(model_id)}"
    if not words:
        return head
    if not all(isinstance(word, str) for word in words):
        raise _non_string_error(words)
    return head + CONTINUATION + words[0] + _joined(words)


def format_argv(model_id: Any, args: list[Any], *, final: bool = False) -> list[Any]:
    return ["vllm", "serve", model_id, *(args if final else final_args(args))]


class ArgvSegment:
    """One layer of an argv, compiled: kept tokens, the flags they set, their text.

    ``plain`` is false when a token is not a string (the site then fails while
    printing); such segments only ever take the token-by-token path.
    """

    __slots__ = ("tokens", "flags", "plain", "leads_with_flag", "ends_with_flag", "first", "rest_text")

    def __init__(self, args: Iterable[Any]) -> None:
        tokens = kept_tokens(args)
        self.tokens: list[Any] = tokens
        self.plain = all(isinstance(word, str) for word in tokens)
        self.flags: list[Any] = [a for a in tokens if isinstance(a, str) and a[:1] == "-"] if tokens else []
        if self.plain and tokens:
            self.leads_with_flag = tokens[0][:1] == "-"
            self.ends_with_flag = tokens[-1][:1] == "-"
            self.first: str = tokens[0]
            self.rest_text = _joined(tokens)
        else:
            self.leads_with_flag = self.ends_with_flag = False
            self.first = self.rest_text = ""


EMPTY_SEGMENT = ArgvSegment(())


def render_segments(model_id: Any, segments: Sequence[ArgvSegment]) -> tuple[str, list[Any]]:
    """(command string, argv) of the argv the segments make, after the last-wins dedupe."""
    parts = [segment for segment in segments if segment.tokens]
    flags = [flag for segment in parts for flag in segment.flags]
    if len(flags) != len(set(flags)) or not all(segment.plain for segment in parts):
        words = dedupe_flags([token for segment in parts for token in segment.tokens])
        return format_command(model_id, words, final=True), format_argv(model_id, words, final=True)
    pieces = [f"vllm serve {text(model_id)}"]
    after_flag = False
    for segment in parts:
        if after_flag and not segment.leads_with_flag:
            pieces.append(" " + _quoted(segment.first))
        else:
            pieces.append(CONTINUATION + segment.first)
        pieces.append(segment.rest_text)
        after_flag = segment.ends_with_flag
    argv = ["vllm", "serve", model_id]
    for segment in parts:
        argv += segment.tokens
    return "".join(pieces), argv
