"""Independent readers of what the collection writes, following each consumer's documented rules.

* :func:`systemd_env_file`: systemd's ``EnvironmentFile=`` parser (systemd.exec(5)
  "EnvironmentFile=", ``parse_env_file_internal`` in src/basic/env-file.c): CR and LF
  end lines, ``#``/``;`` comments (a trailing backslash continues them), leading and
  trailing blanks of unquoted values dropped, backslash escapes, single and double quotes.
* :func:`docker_env_file`: ``docker run --env-file`` (docker/cli opts/file.go): lines end at
  LF (``bufio.ScanLines`` drops one CR before it), a line of 64 KiB or more is an error,
  leading blanks trimmed, ``#`` comments, the value is everything after the first ``=``.
* :func:`shim_env_file`: the container's secret shim (``read -r`` and ``export "$line"``).
* :func:`unit_directives` / :func:`exec_argv`: systemd.syntax(7) and systemd.service(5):
  continuation lines, ``%`` specifiers, word splitting with C escapes inside quotes, then
  ``$VAR`` expansion with ``$$`` for a literal ``$``.

These readers are deliberately written from the documentation, not from the writer, so
a writer bug shows up as a difference.
"""

from __future__ import annotations

import re

WHITESPACE = " \t\n\r"
NEWLINE = "\n\r"
DOCKER_MAX_LINE = 64 * 1024


class ReadError(ValueError):
    """The consumer would reject the file (or expand something we did not mean)."""


def systemd_env_file(text: str) -> dict[str, str]:
    """``{name: value}`` as systemd's EnvironmentFile= reads ``text``."""
    out: dict[str, str] = {}
    state, key, value, trailing = "pre_key", "", "", 0
    for char in text + "\n":
        if state == "pre_key":
            if char in "#;":
                state = "comment"
            elif char not in WHITESPACE:
                state, key = "key", char
        elif state == "key":
            if char in NEWLINE:
                state = "pre_key"  # a line without "=" is ignored
            elif char == "=":
                state, value, trailing = "pre_value", "", 0
            else:
                key += char
        elif state == "pre_value":
            if char in NEWLINE:
                out[key.rstrip(WHITESPACE)] = value
                state = "pre_key"
            elif char == "'":
                state = "single"
            elif char == '"':
                state = "double"
            elif char == "\\":
                state = "value_escape"
            elif char not in WHITESPACE:
                state, value = "value", value + char
        elif state == "value":
            if char in NEWLINE:
                out[key.rstrip(WHITESPACE)] = value[:len(value) - trailing] if trailing else value
                state = "pre_key"
            elif char == "\\":
                state, trailing = "value_escape", 0
            else:
                value += char
                trailing = trailing + 1 if char in WHITESPACE else 0
        elif state == "value_escape":
            state = "value"
            if char not in NEWLINE:  # backslash-newline continues the line
                value += char
        elif state == "single":
            if char == "'":
                state = "pre_value"
            else:
                value += char
        elif state == "double":
            if char == '"':
                state = "pre_value"
            elif char == "\\":
                state = "double_escape"
            else:
                value += char
        elif state == "double_escape":
            state = "double"
            if char in '"\\`$':
                value += char
            elif char not in NEWLINE:
                value += "\\" + char
        elif state == "comment":
            if char == "\\":
                state = "comment_escape"
            elif char in NEWLINE:
                state = "pre_key"
        elif state == "comment_escape":
            state = "comment"
    if state not in ("pre_key", "comment"):
        raise ReadError(f"unterminated value for {key!r}")
    return out


def docker_env_file(text: str) -> dict[str, str]:
    """``{name: value}`` as ``docker run --env-file`` reads ``text``."""
    out: dict[str, str] = {}
    body = text.removeprefix("\ufeff")
    for raw in body.split("\n")[:-1] if body.endswith("\n") else body.split("\n"):
        if len((raw + "\n").encode("utf-8")) >= DOCKER_MAX_LINE:
            raise ReadError("bufio.Scanner: token too long")
        line = raw[:-1] if raw.endswith("\r") else raw
        line = line.lstrip()
        if not line or line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        name = name.lstrip()
        if any(c.isspace() for c in name) or not name:
            raise ReadError(f"bad variable name {name!r}")
        if eq:
            out[name] = value
    return out


def shim_env_file(text: str) -> dict[str, str]:
    """``{name: value}`` as the secret shim (``while IFS= read -r line ... export "$line"``) reads it."""
    out: dict[str, str] = {}
    for line in text.split("\n")[:-1]:
        if line == "" or line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        if not eq or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise ReadError(f"export: bad variable name {name!r}")
        out[name] = value
    return out


def unit_directives(text: str) -> list[tuple[str, str, str]]:
    """``(section, name, raw value)`` of a unit, continuation lines joined, comments dropped."""
    out: list[tuple[str, str, str]] = []
    section, pending = "", ""
    for raw in text.split("\n"):
        if raw.lstrip().startswith(("#", ";")):
            continue  # comment lines, even inside a continuation
        line = pending + raw if pending else raw
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        name, eq, value = stripped.partition("=")
        if not eq:
            raise ReadError(f"not an assignment: {stripped!r}")
        out.append((section, name.strip(), value.strip()))
    return out


def specifiers(value: str) -> str:
    """Expand ``%%``; any other specifier would be replaced by systemd: an error here."""
    out, index = "", 0
    while index < len(value):
        if value[index] == "%":
            if value[index + 1:index + 2] != "%":
                raise ReadError(f"specifier {value[index:index + 2]!r} would be expanded")
            out, index = out + "%", index + 2
            continue
        out, index = out + value[index], index + 1
    return out


_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
              "\\": "\\", '"': '"', "'": "'", "s": " "}


def _words(line: str) -> list[str]:
    """extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) over a whole line."""
    words: list[str] = []
    index = 0
    while index < len(line):
        if line[index] in WHITESPACE:
            index += 1
            continue
        word, quote = "", None
        while index < len(line):
            char = line[index]
            if quote is None and char in WHITESPACE:
                break
            if char == "\\":
                nxt = line[index + 1:index + 2]
                if nxt in _C_ESCAPES:
                    word += _C_ESCAPES[nxt]
                    index += 2
                elif nxt == "x":
                    word += chr(int(line[index + 2:index + 4], 16))
                    index += 4
                elif nxt == ";" and quote is None:
                    word += ";"
                    index += 2
                else:
                    raise ReadError(f"unknown escape {line[index:index + 2]!r}")
                continue
            if quote is None and char in "\"'":
                quote = char
            elif char == quote:
                quote = None
            else:
                word += char
            index += 1
        if quote is not None:
            raise ReadError("unbalanced quotes")
        words.append(word)
    return words


def _dollars(word: str) -> str:
    out, index = "", 0
    while index < len(word):
        if word[index] == "$":
            if word[index + 1:index + 2] == "$":
                out, index = out + "$", index + 2
                continue
            if re.match(r"\$(\{[A-Za-z_]|[A-Za-z_])", word[index:]):
                raise ReadError(f"variable {word[index:index + 12]!r} would be expanded")
        out, index = out + word[index], index + 1
    return out


def exec_argv(text: str, name: str = "ExecStart") -> list[str]:
    """The argv systemd runs for ``name=`` (prefixes such as ``-`` dropped)."""
    values = [value for _section, key, value in unit_directives(text) if key == name]
    if len(values) != 1:
        raise ReadError(f"{len(values)} {name}= lines")
    words = _words(specifiers(values[0]))
    words[0] = words[0].lstrip("-@:+!")
    return [_dollars(word) for word in words]


def directive(text: str, name: str) -> str:
    """The value of a plain directive, specifiers expanded."""
    values = [value for _section, key, value in unit_directives(text) if key == name]
    if len(values) != 1:
        raise ReadError(f"{len(values)} {name}= lines")
    return specifiers(values[0])
