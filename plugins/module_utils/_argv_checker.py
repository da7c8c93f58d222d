# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Check program argvs with the parser of the program that will run them.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

This file is also a standalone script (pure standard library at import time).
The module ``vllm_argv_check`` mounts it read-only into a throwaway container of
the engine image and runs it with the image's own Python::

    docker run --rm -i --network none -v CHECKER:/vllm-argv-check.py:ro \\
        -e VLLM_TARGET_DEVICE=cpu --entrypoint python3 IMAGE_ID /vllm-argv-check.py engine

It reads a JSON list on stdin, each entry an argv or ``{"argv": [...], "env": {...}}`` (the
process's ``VLLM_*`` settings, set while that argv is checked: a few checks read them, e.g.
``--grpc-port`` needs ``VLLM_USE_RUST_FRONTEND=1``), and prints one JSON object on stdout::

    {"checker": 1, "kind": "engine", "program_version": "0.32.0",
     "results": [{"ok": true, "notes": [...]},
                 {"ok": false, "stage": "parse", "error": "...", "flag": "--foo"}]}

``engine``: each argv is ``["vllm", "serve", MODEL, ...]``. It is parsed by the
``vllm serve`` parser the image's vLLM builds for its own CLI, then checked by
vLLM's own post-parse validation (``validate_parsed_serve_args``), the engine
arguments dataclass (``AsyncEngineArgs.from_cli_args``), and, without a model,
the names vLLM would look up later: ``--tool-call-parser`` in the image's
``ToolParserManager``, ``--reasoning-parser`` in its ``ReasoningParserManager``,
``--tokenizer-mode`` in its ``TokenizerRegistry``, ``--attention-backend`` by
the validator vLLM runs when it builds the engine config
(``AttentionConfig.validate_backend_before``, else a lookup in the image's
``AttentionBackendEnum``, wherever that version keeps it). JSON configs
(``--kv-transfer-config``, ``--compilation-config``, ...) are parsed into their
config classes by the parser itself; ``--speculative-config`` is a dict whose
keys are checked against ``SpeculativeConfig``'s fields, and whose ``method``
and ``attention_backend`` values are validated as ``SpeculativeConfig`` would
(its pydantic field type; the attention backend validator). Where the image's
vLLM offers no way to check a name, the result says so in ``notes``.

``router``: each argv is ``["vllm-router", ...]``, parsed by the argparse front
end of the installed ``vllm_router`` (``vllm_router.router_args``).

The parser's own words are returned, not ours: an unknown flag reads
``vllm serve: error: unrecognized arguments: --foo``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.metadata
import io
import json
import os
import re
import sys
import time
from typing import Any, Dict, List, Set, get_args

# Part of every cache key: a new version re-checks what an older checker accepted.
CHECKER_VERSION = 2

_FLAG_RE = re.compile(r"(?:^|[\s'\"(])(--[A-Za-z][\w.-]*)")
_PARAMETER_RE = re.compile(r"parameter=([A-Za-z]\w*)")
# Where vLLM keeps its attention backend enum, newest first (it moved between versions).
_ATTENTION_BACKEND_ENUMS = ("vllm.v1.attention.backends.registry", "vllm.attention.backends.registry")


def _first_flag(message):
    """The first flag a parser message names (for telling where it came from)."""
    match = _FLAG_RE.search(message or "")
    if match:
        return match.group(1)
    match = _PARAMETER_RE.search(message or "")
    return "--" + match.group(1).replace("_", "-") if match else None


def _parse(parser, args):
    """``parser.parse_args(args)``: (namespace, None) or (None, the parser's message)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_args(args), None
    except SystemExit:
        text = err.getvalue().strip()
        # argparse prints the usage (hundreds of lines for vllm serve) then "PROG: error: MSG".
        lines = [line for line in text.splitlines() if ": error: " in line]
        if lines:
            index = text.find(lines[0])
            return None, text[index:].strip()
        return None, text.splitlines()[-1] if text else "the parser exited without a message"
    except Exception as exc:  # pylint: disable=broad-except
        return None, f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def _environ(env):
    """The process's own ``VLLM_*`` settings while its argv is checked (some checks read them)."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _entry(entry):
    """``[argv...]`` or ``{"argv": [...], "env": {...}}`` -> (argv, env)."""
    if isinstance(entry, dict):
        argv, env = entry.get("argv"), entry.get("env") or {}
    else:
        argv, env = entry, {}
    if not (isinstance(argv, list) and all(isinstance(t, str) for t in argv)
            and isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise ValueError("each entry must be an argv (list of strings) or {argv, env (strings)}")
    return argv, env


def _failure(stage, message, flag=None):
    return {"ok": False, "stage": stage, "error": message, "flag": flag or _first_flag(message)}


# --------------------------------------------------------------------------------------
# vLLM
# --------------------------------------------------------------------------------------
class VllmServeChecker:
    """The image's own ``vllm serve`` parser and model-free validation."""

    def __init__(self):
        import vllm  # noqa: F401  (pylint: disable=import-error)

        self.version = getattr(vllm, "__version__", "unknown")
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:  # vLLM before the utils split
            from vllm.utils import FlexibleArgumentParser
        self.validate = None
        self.parser = None
        try:
            # What `vllm serve` itself builds (vllm/entrypoints/cli/main.py).
            from vllm.entrypoints.cli.serve import cmd_init

            root = FlexibleArgumentParser(prog="vllm")
            subparsers = root.add_subparsers(required=False, dest="subparser")
            serve = [cmd for cmd in cmd_init() if cmd.name == "serve"][0]
            serve.subparser_init(subparsers)
            self.parser = root
            self.validate = serve.validate
        except ImportError:
            from vllm.entrypoints.openai.cli_args import make_arg_parser

            self.parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
        self.tool_parsers = self._registered("vllm.tool_parsers", "ToolParserManager",
                                             "vllm.entrypoints.openai.tool_parsers")
        self.reasoning_parsers = self._registered("vllm.reasoning", "ReasoningParserManager")
        self.tokenizer_modes = self._tokenizer_modes()
        self.attention_backend = self._attention_backend_validator()

    @staticmethod
    def _registered(module, name, *fallbacks):
        for candidate in (module,) + fallbacks:
            try:
                manager = getattr(importlib.import_module(candidate), name)
            except (ImportError, AttributeError):
                continue
            if hasattr(manager, "list_registered"):
                return list(manager.list_registered())
            for attr in ("tool_parsers", "reasoning_parsers", "lazy_parsers"):
                if isinstance(getattr(manager, attr, None), dict):
                    return sorted(getattr(manager, attr))
        return None

    @staticmethod
    def _tokenizer_modes():
        modes: Set[str] = set()
        try:
            from vllm.config.model import TokenizerMode

            modes.update(get_args(TokenizerMode))
        except ImportError:
            pass
        try:
            from vllm.tokenizers.registry import TokenizerRegistry

            modes.update(TokenizerRegistry.tokenizers)
        except (ImportError, AttributeError):
            return None
        return sorted(modes | {"auto"})

    @staticmethod
    def _attention_backend_validator():
        """vLLM's own check of an attention backend name (raises with vLLM's words), or None.

        What ``EngineArgs.create_engine_config`` runs on ``--attention-backend``
        (``AttentionConfig.validate_backend_before``: "auto" is automatic, any other name
        must be a member of ``AttentionBackendEnum``); on a vLLM without it, a lookup in
        the image's enum, wherever that version keeps it; None when there is neither.
        """
        try:
            from vllm.config.attention import AttentionConfig

            validate = getattr(AttentionConfig, "validate_backend_before", None)
            if callable(validate):
                return validate
        # moved, or fails to import here
        except Exception:  # pylint: disable=broad-except
            pass
        for module in _ATTENTION_BACKEND_ENUMS:
            try:
                enum = importlib.import_module(module).AttentionBackendEnum
            except Exception:  # pylint: disable=broad-except
                continue

            def lookup(name, enum=enum):
                if name.lower() == "auto":
                    return None
                try:
                    return enum[name.upper()]  # vLLM's metaclass raises ValueError with its words
                except KeyError:
                    raise ValueError(f"Unknown attention backend: '{name.upper()}'. Valid options "
                                     f"are: {', '.join(enum.__members__)}") from None

            return lookup
        return None

    def _attention_backend(self, name, notes, flag="--attention-backend", key=None):
        """Refuse (stage ``attention-backend``) a backend name the image's registry lacks, in vLLM's words."""
        if not isinstance(name, str):
            return None  # unset, or already parsed into the image's enum
        where = f"{flag} {key}" if key else flag
        if self.attention_backend is None:
            notes.append(f"{where} {name}: not checked (vLLM {self.version} has no attention backend "
                         "registry the checker knows)")
            return None
        try:
            self.attention_backend(name)
        except Exception as exc:  # pylint: disable=broad-except
            return _failure("attention-backend", f"{key}: {exc}" if key else str(exc), flag=flag)
        return None

    def check(self, argv):
        if len(argv) < 2 or argv[0].rsplit("/", 1)[-1] != "vllm" or argv[1] != "serve":
            return _failure("program", f"not a `vllm serve` command: {argv[:2]!r}", flag="")
        if self.validate is not None:
            args, error = _parse(self.parser, list(argv[1:]))
        else:
            args, error = _parse(self.parser, list(argv[2:]))
        if error:
            return _failure("parse", error)
        notes: List[str] = []
        try:
            if self.validate is not None:
                self.validate(args)
            else:
                from vllm.entrypoints.openai.cli_args import validate_parsed_serve_args

                validate_parsed_serve_args(args)
        except Exception as exc:  # pylint: disable=broad-except
            return _failure("validate", str(exc))
        failure = self._names(args, notes)
        if failure:
            return failure
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs

            AsyncEngineArgs.from_cli_args(args)
        except Exception as exc:  # pylint: disable=broad-except
            return _failure("engine-args", f"{type(exc).__name__}: {exc}")
        failure = self._speculative(args, notes)
        if failure:
            return failure
        return {"ok": True, "notes": notes}

    @staticmethod
    def _registered_name(name, plugin, registered, what, notes):
        """vLLM's own refusal of a parser name the image does not register (None when fine)."""
        flag = f"--{what}"
        if not name or registered is None:
            return None
        if plugin:
            notes.append(f"{flag} {name}: not checked (a plugin is given: {plugin})")
            return None
        if name in registered:
            return None
        words = what.replace("-", " ")
        return _failure(what, f"invalid {words}: {name} (chose from {{ {','.join(registered)} }})", flag=flag)

    def _names(self, args, notes):
        failure = self._registered_name(getattr(args, "tool_call_parser", None),
                                        getattr(args, "tool_parser_plugin", None),
                                        self.tool_parsers, "tool-call-parser", notes)
        if failure:
            return failure
        structured = getattr(args, "structured_outputs_config", None)
        failure = self._registered_name(
            getattr(args, "reasoning_parser", None) or getattr(structured, "reasoning_parser", None),
            getattr(args, "reasoning_parser_plugin", None), self.reasoning_parsers, "reasoning-parser", notes)
        if failure:
            return failure
        mode = getattr(args, "tokenizer_mode", None)
        if mode and self.tokenizer_modes is not None and str(mode).lower() not in self.tokenizer_modes:
            return _failure("tokenizer-mode",
                            f"No tokenizer registered for tokenizer_mode={str(mode).lower()!r} "
                            f"(registered: {', '.join(self.tokenizer_modes)})",
                            flag="--tokenizer-mode")
        return self._attention_backend(getattr(args, "attention_backend", None), notes)

    def _speculative(self, args, notes):
        spec = getattr(args, "speculative_config", None)
        if not isinstance(spec, dict):
            return None
        try:
            from vllm.config import SpeculativeConfig

            fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
        except Exception:  # pylint: disable=broad-except
            return None
        unknown = sorted(set(spec) - fields)
        if unknown:
            return _failure("speculative-config",
                            f"--speculative-config: unknown key(s) {', '.join(unknown)} "
                            f"(SpeculativeConfig fields: {', '.join(sorted(fields))})",
                            flag="--speculative-config")
        if spec.get("method") is not None:
            failure = self._speculative_method(SpeculativeConfig, spec["method"], notes)
            if failure:
                return failure
        return self._attention_backend(spec.get("attention_backend"), notes, "--speculative-config",
                                       "attention_backend")

    @staticmethod
    def _speculative_method(config_class, method, notes):
        """``method`` validated by the type of ``SpeculativeConfig.method`` (what pydantic checks when vLLM
        builds the config, before the draft model loads): its ``Literal`` of the image's method names."""
        field = (getattr(config_class, "__pydantic_fields__", None) or {}).get("method")
        try:
            from pydantic import TypeAdapter, ValidationError

            adapter = TypeAdapter(field.annotation) if field is not None else None
        except Exception:  # pylint: disable=broad-except
            adapter = None
        if adapter is None:
            notes.append(f"--speculative-config method {method!r}: not checked (SpeculativeConfig of this vLLM "
                         "is not validated by pydantic)")
            return None
        try:
            adapter.validate_python(method)
        except ValidationError as exc:
            errors = exc.errors()
            words = "; ".join(str(error.get("msg")) for error in errors)
            count = f"{len(errors)} validation error{'s' if len(errors) != 1 else ''}"  # pydantic's wording
            return _failure("speculative-config",
                            f"{count} for SpeculativeConfig: method: {words} [input_value={method!r}]",
                            flag="--speculative-config")
        return None


# --------------------------------------------------------------------------------------
# vllm-router
# --------------------------------------------------------------------------------------
class RouterChecker:
    """The argparse front end of the installed ``vllm_router``."""

    def __init__(self):
        try:
            self.version = importlib.metadata.version("vllm-router")
        except Exception:  # pylint: disable=broad-except
            self.version = "unknown"
        # What vllm_router.launch_router.parse_router_args builds.
        from vllm_router.router_args import RouterArgs  # pylint: disable=import-error

        self.router_args = RouterArgs
        self.parser = argparse.ArgumentParser(prog="vllm-router")
        RouterArgs.add_cli_args(self.parser, use_router_prefix=False)

    def check(self, argv):
        if not argv or not argv[0].rsplit("/", 1)[-1].startswith("vllm-router"):
            return _failure("program", f"not a `vllm-router` command: {argv[:1]!r}", flag="")
        args, error = _parse(self.parser, list(argv[1:]))
        if error:
            return _failure("parse", error)
        try:
            router_args = self.router_args.from_cli_args(args, use_router_prefix=False)
            validate = getattr(router_args, "_validate_router_args", None)
            if validate is not None:
                validate()  # pylint: disable=not-callable
        except Exception as exc:  # pylint: disable=broad-except
            return _failure("validate", str(exc))
        return {"ok": True, "notes": []}


CHECKERS: Dict[str, Any] = {"engine": VllmServeChecker, "router": RouterChecker}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    kind = argv[0] if argv else "engine"
    started = time.monotonic()
    try:
        entries = json.load(sys.stdin)
        if not isinstance(entries, list):
            raise ValueError("stdin must be a JSON list of argvs or {argv, env} objects")
        entries = [_entry(entry) for entry in entries]
        checker = CHECKERS[kind]()
    except Exception as exc:  # pylint: disable=broad-except
        json.dump({"checker": CHECKER_VERSION, "kind": kind,
                   "setup_error": f"{type(exc).__name__}: {exc}"}, sys.stdout)
        return 3
    setup_s = time.monotonic() - started
    results = []
    for one, env in entries:
        begun = time.monotonic()
        with _environ(env):
            result = checker.check(one)
        result["check_ms"] = round((time.monotonic() - begun) * 1000, 2)
        results.append(result)
    json.dump({"checker": CHECKER_VERSION, "kind": kind, "program_version": checker.version,
               "setup_s": round(setup_s, 2), "results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
