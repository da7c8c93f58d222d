# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The one writer of systemd unit files and env files: safe by construction.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Every value that reaches a unit or an env file passes through here. A value is
either refused (:class:`UnsafeValueError`, naming the inventory key, the value
with control characters made visible, or a sha256 fingerprint for a secret, and
what would be accepted) or written so that its readers get exactly that value
back:

* unit files (systemd.syntax(7), systemd.service(5)): plain directive values
  have ``%`` doubled; each ``Exec*`` argument is double-quoted with ``\\`` and
  ``"`` C-escaped, ``%`` doubled (specifiers) and ``$`` doubled (variables);
* env files (``KEY=value``) are read by systemd's ``EnvironmentFile=`` and by
  ``docker run --env-file``. The two parsers agree only on plain values, so a
  value with a quote, backslash, ``$`` or surrounding blanks is refused;
* secret files (``KEY=value``) are read only by the container's shim, which
  splits each line at the first ``=`` and evaluates nothing.

No value may hold a control character (LF, CR, NUL, ...), a line or paragraph
separator, a byte-order mark or a unicode noncharacter: systemd ends env-file lines at CR and LF,
docker only at LF, so such a value means two different things to two readers.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Optional, Union

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import SelectionError
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._secret import fingerprint

__all__ = [
    "MAX_UNIT_LINE_BYTES",
    "MAX_VALUE_BYTES",
    "UnsafeValueError",
    "check_env_value",
    "check_path",
    "check_text",
    "control_problem",
    "env_file",
    "exec_directive",
    "fingerprint",
    "systemd_quote",
    "unit_file",
]

#: Longest value (UTF-8 bytes) written into a unit or env file. docker's ``--env-file``
#: reader (Go ``bufio.Scanner``) fails on a line of 64 KiB; the kernel refuses an argv or
#: environment string over ``MAX_ARG_STRLEN`` (128 KiB). Half of docker's limit leaves room
#: for the name.
MAX_VALUE_BYTES = 32 * 1024
#: systemd reads a unit line, continuations joined, up to ``LONG_LINE_MAX`` (1 MiB).
MAX_UNIT_LINE_BYTES = 1024 * 1024 - 1

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What systemd's EnvironmentFile= and docker's --env-file both read verbatim.
_PLAIN_ENV_RE = re.compile(r"^([^\s\"'\\$`]([^\"'\\$`]*[^\s\"'\\$`])?)?$")
# An Exec* program, written unquoted: an absolute path of plain characters.
_PROGRAM_RE = re.compile(r"^/[A-Za-z0-9_@+=:,./-]+$")
# An absolute path safe everywhere we write it (unit, env, docker -v SRC:DST, JSON).
_PATH_RE = re.compile(r"^/[A-Za-z0-9_@+.,/-]*$")

ENV_EXPECTED = ("a single-line value without quotes, backslashes, '$' or surrounding blanks "
                "(env files are read by systemd and docker)")


class UnsafeValueError(SelectionError):
    """A value cannot be written into a unit, env file, path or argv unchanged."""


def _shown(value: str, secret: bool) -> str:
    return fingerprint(value) if secret else value


def control_problem(text: str) -> Optional[str]:
    """Why ``text`` cannot go on one line of a unit or env file, or ``None``."""
    if text.isascii() and text.isprintable():  # fast path: no ASCII printable is refused below
        return None
    for char in text:
        category = unicodedata.category(char)
        if category in ("Cc", "Cs", "Zl", "Zp") or char == "\ufeff":
            return f"a control character ({char!r}: LF, CR, NUL, TAB and the like end or split lines)"
        code = ord(char)
        if 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE:  # systemd refuses noncharacters
            return f"a unicode noncharacter ({char!r})"
    return None


def check_text(key: str, value: str, *, fix: str = "", secret: bool = False,
               max_bytes: int = MAX_VALUE_BYTES, what: str = "a single-line value") -> str:
    """``value`` unchanged, or :class:`UnsafeValueError` (control character, too long)."""
    if not isinstance(value, str):
        raise UnsafeValueError(key, value=_shown(str(value), secret), expected=f"{what} (a string)",
                               reason=f"fix: {fix or 'quote the value of ' + key}")
    problem = control_problem(value)
    if problem is not None:
        raise UnsafeValueError(key, value=_shown(value, secret),
                               expected=f"{what} without control characters; found {problem}",
                               reason=f"fix: {fix or 'remove the control characters from ' + key}")
    size = len(value.encode("utf-8"))
    if size > max_bytes:
        raise UnsafeValueError(key, value=_shown(value, secret),
                               expected=f"{what} of at most {max_bytes} bytes (got {size}): longer "
                                        "lines do not load in systemd units or docker env files",
                               reason=f"fix: {fix or 'shorten ' + key}")
    return value


def format_problem(text: str) -> Optional[str]:
    """Why ``text`` cannot be a name shown to people (a folder, unit, PLAN.md row), or ``None``.

    Unicode format characters (category Cf: bidi overrides such as U+202E, zero-width joiners
    and spaces, soft hyphens, tags) are invisible: they reorder or hide what a name shows, so two
    names that look alike differ. Letters of every script are fine.
    """
    if text.isascii():
        return None
    for char in text:
        if unicodedata.category(char) == "Cf":
            return (f"a unicode format character ({char!r}, U+{ord(char):04X} "
                    f"{unicodedata.name(char, 'unnamed')}: invisible, it reorders or hides what the name shows)")
    return None


def check_name(key: str, value: str, *, fix: str = "", max_bytes: int = MAX_VALUE_BYTES,
               what: str = "a name") -> str:
    """``value`` unchanged when it may name a folder, unit or PLAN.md row: :func:`check_text`, and
    no unicode format character (:func:`format_problem`). The one rule for every such name."""
    check_text(key, value, fix=fix, max_bytes=max_bytes, what=what)
    problem = format_problem(value)
    if problem is not None:
        raise UnsafeValueError(key, value=value, expected=f"{what} without invisible characters; found {problem}",
                               reason=f"fix: {fix or 'retype ' + key + ' without the invisible character'}")
    return value


def check_env_value(key: str, value: str, *, fix: str = "") -> str:
    """A value both systemd's ``EnvironmentFile=`` and docker's ``--env-file`` read verbatim."""
    check_text(key, value, fix=fix)
    if not _PLAIN_ENV_RE.match(value):
        raise UnsafeValueError(key, value=value, expected=ENV_EXPECTED,
                               reason=f"fix: {fix or 'simplify the value of ' + key}")
    return value


def check_path(key: str, value: str, *, fix: str = "") -> str:
    """An absolute path of plain characters without ``.`` / ``..`` components."""
    check_text(key, value, fix=fix, max_bytes=4096, what="an absolute path")
    parts = value.split("/")[1:]
    if not _PATH_RE.match(value) or any(part in (".", "..") for part in parts):
        raise UnsafeValueError(key, value=value,
                               expected="an absolute path of letters, digits and '_@+.,-' "
                                        "without '.' or '..' components",
                               reason=f"fix: {fix or 'set ' + key + ' to a plain absolute path'}")
    return value


# --------------------------------------------------------------------------------------
# unit files
# --------------------------------------------------------------------------------------

def systemd_quote(arg: str) -> str:
    """One ``Exec*`` argument, double-quoted so systemd passes it through unchanged.

    systemd first expands specifiers (``%%`` -> ``%``), then splits words with C
    unescaping inside quotes, then expands ``$VAR`` (``$$`` -> ``$``).
    """
    if arg == ";":
        return "\\;"
    escaped = (arg.replace("\\", "\\\\").replace('"', '\\"')
               .replace("%", "%%").replace("$", "$$"))
    return f'"{escaped}"'


def _plain(key: str, value: str) -> str:
    """A plain directive value: one line, no edge blanks (systemd strips them), ``%`` doubled."""
    check_text(key, value)
    if value != value.strip() or value.endswith("\\"):
        raise UnsafeValueError(key, value=value,
                               expected="a value without surrounding blanks or a trailing backslash",
                               reason=f"fix: simplify {key}")
    return value.replace("%", "%%")


def exec_directive(name: str, argv: Sequence[str], key: str, *, prefix: str = "",
                   one_per_line: bool = True) -> list[str]:
    """``Exec*=`` lines for ``argv``: the program unquoted, each argument quoted."""
    if not argv:
        raise UnsafeValueError(key, value=list(argv), expected="a command", reason=f"fix: set {key}")
    program = argv[0]
    check_text(key, program)
    if not _PROGRAM_RE.match(program):
        raise UnsafeValueError(key, value=program, expected="an absolute executable path of plain "
                               "characters", reason=f"fix: set {key} to an absolute path")
    if one_per_line:
        words = [program] + [systemd_quote(check_text(key, arg)) for arg in argv[1:]]
    else:  # short commands (docker rm/stop NAME): plain tokens stay unquoted
        words = [program] + [arg if _PROGRAM_RE.match("/" + arg) and arg != ";"
                             else systemd_quote(check_text(key, arg)) for arg in argv[1:]]
    if not one_per_line:
        lines = [f"{name}={prefix}{' '.join(words)}"]
    else:
        lines = [f"{name}={prefix}{program}"] + [f"    {word}" for word in words[1:]]
        lines = [line + " \\" for line in lines[:-1]] + lines[-1:]
    size = sum(len(line.encode("utf-8")) for line in lines)
    if size > MAX_UNIT_LINE_BYTES:
        raise UnsafeValueError(key, value=f"{len(argv)} arguments, {size} bytes",
                               expected=f"a command line of at most {MAX_UNIT_LINE_BYTES} bytes "
                                        "(systemd's LONG_LINE_MAX)",
                               reason=f"fix: shorten {key}")
    return lines


#: A directive: ``(name, value, key)`` with a plain string value, or ``(name, lines)``
#: already built by :func:`exec_directive`.
Directive = Union[tuple[str, str, str], tuple[str, list[str]]]


def unit_file(comments: Sequence[tuple[str, str]],
              sections: Sequence[tuple[str, Sequence[Directive]]]) -> str:
    """A whole unit: ``# comment`` lines (``(text, key)``), then ``[Section]`` blocks."""
    lines = [f"# {check_text(key, text)}" for text, key in comments]
    for section, directives in sections:
        lines += ["", f"[{section}]"]
        for directive in directives:
            if len(directive) == 3:
                name, value, key = directive
                lines.append(f"{name}={_plain(key, value)}")
            else:
                lines += directive[1]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# env files
# --------------------------------------------------------------------------------------

def _comment(text: str) -> str:
    # systemd continues an env-file comment that ends with a backslash onto the next line
    check_text("comment", text)
    if text.endswith("\\"):
        raise UnsafeValueError("comment", value=text, expected="a comment without a trailing backslash",
                               reason="fix: report this: comments are generated")
    return text


def env_file(comments: Sequence[str], entries: Sequence[tuple[str, str, str]], *,
             secret: bool = False) -> str:
    """``KEY=value`` lines from ``(name, value, key)`` entries, after ``# comment`` lines.

    ``secret=False``: read by systemd and docker, so only plain values pass
    (:func:`check_env_value`). ``secret=True``: read by the shim only (split at the first
    ``=``, nothing evaluated), so any single-line value passes and messages show a
    fingerprint instead of the value.
    """
    lines = [f"# {_comment(text)}" for text in comments]
    for name, value, key in entries:
        if not ENV_NAME_RE.match(name):
            raise UnsafeValueError(key, value=name, expected="an environment variable name "
                                   "([A-Za-z_][A-Za-z0-9_]*)", reason=f"fix: rename {key}")
        if secret:
            check_text(key, value, secret=True)
        else:
            check_env_value(key, value)
        lines.append(f"{name}={value}")
    return "\n".join(lines) + "\n"
