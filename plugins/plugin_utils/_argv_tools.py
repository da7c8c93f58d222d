# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""argv and placeholder helpers: vLLM flags, ``$PLACEHOLDER`` filling, recipe command splitting.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

_PLACEHOLDER_RE = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}|\$([A-Z][A-Z0-9_]*)")

_SHORT_ALIASES = {
    "--tensor-parallel-size": ("-tp",),
    "--pipeline-parallel-size": ("-pp",),
    "--data-parallel-size": ("-dp",),
    "--data-parallel-size-local": ("-dpl",),
    "--data-parallel-start-rank": ("-dpr",),
    "--data-parallel-address": ("-dpa",),
    "--data-parallel-rpc-port": ("-dpp",),
}


def flag_value(argv: Sequence[str], name: str) -> Optional[str]:
    """Last value of ``name`` (``--x v`` or ``--x=v``; short aliases too)."""
    names = (name,) + _SHORT_ALIASES.get(name, ())
    found: Optional[str] = None
    for index, token in enumerate(argv):
        for candidate in names:
            if token == candidate and index + 1 < len(argv):
                found = argv[index + 1]
            elif token.startswith(candidate + "="):
                found = token[len(candidate) + 1:]
    return found


def has_flag(argv: Sequence[str], name: str) -> bool:
    return any(t == name or t.startswith(name + "=") for t in argv)


def _whole_flag(argv: Sequence[str], name: str) -> Optional[int]:
    """The last value of ``name`` as a whole number; None when absent or not a number."""
    value = flag_value(argv, name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _int_flag(argv: Sequence[str], name: str, default: int) -> int:
    value = _whole_flag(argv, name)
    return default if value is None else value


@dataclass(frozen=True)
class EngineArgs:
    """What placement reads of an engine's final ``vllm serve`` argv, read once.

    The last value of a flag wins; ``--x=v`` and the short aliases count. A count or port that
    is not a whole number reads as the flag's default.
    """

    #: the checkpoint: ``--model``, else the positional after ``vllm serve``
    model: Optional[str]
    #: the name the OpenAI API answers to: ``--served-model-name``, else the checkpoint
    served_name: Optional[str]
    pins_revision: bool
    #: ``--port`` as written (None: vLLM's default)
    port: Optional[str]
    headless: bool
    nnodes: int
    node_rank: int
    master_port: Optional[int]
    tp: int
    pp: int
    dp: int
    dp_local: int
    dp_start_rank: int
    dp_address: bool
    dp_rpc_port: Optional[int]

    @property
    def gpus_per_node(self) -> int:
        """Accelerators one node needs: ``tp * pp * dp_local``, or the mp backend's share of
        ``tp * pp * dp`` over ``--nnodes``."""
        if self.nnodes > 1:
            return max(1, (self.tp * self.pp * self.dp) // self.nnodes)
        return max(1, self.tp * self.pp * self.dp_local)


def engine_args(argv: Sequence[str]) -> EngineArgs:
    """Read an engine's final argv (see :class:`EngineArgs`)."""
    args = list(argv)
    model = flag_value(args, "--model") or (args[2] if args[:2] == ["vllm", "serve"] and len(args) > 2 else None)
    dp = _int_flag(args, "--data-parallel-size", 1)
    return EngineArgs(
        model=model, served_name=flag_value(args, "--served-model-name") or model,
        pins_revision=has_flag(args, "--revision"), port=flag_value(args, "--port"),
        headless=has_flag(args, "--headless"), nnodes=max(1, _int_flag(args, "--nnodes", 1)),
        node_rank=_int_flag(args, "--node-rank", 0), master_port=_whole_flag(args, "--master-port"),
        tp=_int_flag(args, "--tensor-parallel-size", 1), pp=_int_flag(args, "--pipeline-parallel-size", 1),
        dp=dp, dp_local=_int_flag(args, "--data-parallel-size-local", dp),
        dp_start_rank=_int_flag(args, "--data-parallel-start-rank", 0),
        dp_address=flag_value(args, "--data-parallel-address") is not None,
        dp_rpc_port=_whole_flag(args, "--data-parallel-rpc-port"))


def compact_json(token: str) -> str:
    """A JSON object or array written over several lines, on one line; other tokens unchanged.

    Whitespace between JSON tokens is insignificant, so a pretty-printed ``--speculative-config``
    (a YAML block scalar) becomes the compact form recipes use (``{"a":1,"b":[2,3]}``): key order,
    numbers and escapes are kept as written, only the blanks and line breaks between tokens go.
    A token that is not valid JSON, or has a raw line break inside a string, is left as is (and
    refused later for its line break).
    """
    if "\n" not in token and "\r" not in token:
        return token
    stripped = token.strip()
    if not stripped.startswith(("{", "[")):
        return token
    try:
        json.loads(stripped)
    except ValueError:
        return token
    out: list[str] = []
    in_string = escaped = False
    for char in stripped:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in " \t\n\r":
            continue
        out.append(char)
    return "".join(out)


def find_placeholders(value: Any) -> list[str]:
    """Every ``$NAME`` / ``${NAME}`` left in a string, list or mapping (sorted, unique)."""
    found: set[str] = set()

    def walk(item: Any) -> None:
        if isinstance(item, str):
            for match in _PLACEHOLDER_RE.finditer(item):
                found.add(match.group(1) or match.group(2))
        elif isinstance(item, Mapping):
            for key, sub in item.items():
                walk(key)
                walk(sub)
        elif isinstance(item, (list, tuple)):
            for sub in item:
                walk(sub)

    walk(value)
    return sorted(found)


def url_host(address: str) -> str:
    """``address`` as the host part of a URL: IPv6 literals in brackets (RFC 3986)."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def fill_placeholders(value: Any, mapping: Mapping[str, str]) -> Any:
    """Replace known ``$NAME`` / ``${NAME}`` tokens; unknown ones stay for the final check.

    An IPv6 address filled in where a URL host goes (after ``://``, or before ``:PORT``)
    is bracketed.
    """

    def sub(text: str) -> str:
        def repl(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            if name not in mapping:
                return match.group(0)
            value = mapping[name]
            in_url = (text[:match.start()].endswith(("://", "@"))
                      or re.match(r":[0-9]", text[match.end():match.end() + 2]) is not None)
            return url_host(value) if in_url and _is_ipv6(value) else value

        return _PLACEHOLDER_RE.sub(repl, text)

    if isinstance(value, str):
        return sub(value) if "$" in value else value
    if isinstance(value, Mapping):
        return {k: fill_placeholders(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(v, mapping) for v in value]
    return value


def _is_ipv6(value: str) -> bool:
    try:
        return ipaddress.ip_address(value).version == 6
    except ValueError:
        return False


def shell_words(command: str) -> list[str]:
    """argv of a recipe's shell snippet (a router or Mooncake command), as a shell reads it.

    Whole ``#`` comment lines go first (a comment's trailing ``\\`` continues nothing), then
    ``\\``-newline joins lines, and a ``#`` outside quotes ends the line (a trailing note).
    ValueError for an unbalanced quote.
    """
    lines = [line for line in command.splitlines() if not line.lstrip().startswith("#")]
    return shlex.split("\n".join(lines).replace("\\\n", " "), comments=True)


def split_joined_flags(argv: Sequence[str]) -> list[str]:
    """Split argv elements that hold a flag and its value joined by a space (``"--max-model-len auto"``).

    Recipes keep such an element as one argv entry; the recipes site's shell command splits it, our
    ``ExecStart`` would pass it as one argument, and vLLM refuses it. Split the way the shell would
    (docs/engine.md, "Where the recipes site is wrong for a target"). Other elements (values such as
    JSON, which never start with ``-``) are kept as they are.
    """
    out: list[str] = []
    for token in argv:
        if token.startswith("-") and any(ch.isspace() for ch in token):
            try:
                out += shlex.split(token)
                continue
            except ValueError:
                pass
        out.append(token)
    return out


def router_argv_for_pinned(argv: Sequence[str]) -> list[str]:
    """A vllm-router argv the pinned vllm-router (0.1.17) accepts.

    The Mooncake ``kv_store_lb`` recipes render one ``--backend-url URL`` per instance, a flag
    vllm-router 0.1.17 (the newest published) does not have; it takes ``--worker-urls URL...``.
    The URLs move to one ``--worker-urls`` where the first ``--backend-url`` was (docs/engine.md).
    """
    out: list[str] = []
    urls: list[str] = []
    at: Optional[int] = None
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--backend-url" and index + 1 < len(argv):
            urls.append(argv[index + 1])
            index += 2
        elif token.startswith("--backend-url="):
            urls.append(token.split("=", 1)[1])
            index += 1
        else:
            out.append(token)
            index += 1
            continue
        at = len(out) if at is None else at
    if at is not None:
        out[at:at] = ["--worker-urls", *urls]
    return out
