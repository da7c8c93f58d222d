"""Command synthesis with the recipes site's semantics, argv for argv.

Private to the vllm_fleet.recipes collection: not a public API.

``resolve_command`` turns a recipe plus a selection into the processes the
recipes site would print: one ``vllm serve`` argv for a single node, a head and
one argv per follower rank for multi-node strategies, prefill/decode pools plus
a vllm-router line for disaggregated serving, and the Mooncake KV-store shell
around any serving strategy. It is a parity layer: it reproduces upstream's
silent fallbacks (unknown variants fall back to ``default``, unknown strategies
behave as single-node). Deployments go through the strict checks in
``_selection`` first.

All inputs are the plain structures ``yaml.safe_load`` returns: ``recipe`` is a
``models/<org>/<repo>.yaml`` document, ``strategies`` maps every serving
strategy and KV-store deployment by name, and ``taxonomy`` holds
``hardware_profiles`` and ``kv_offload``.
"""

from __future__ import annotations

import math
import re
from functools import cached_property, lru_cache
from typing import Any, Callable, Iterable, Mapping, Optional

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._jsvalue import (
    as_int_if_whole,
    first,
    get,
    is_number,
    items,
    js_max,
    js_min,
    number_text,
    present,
    text,
    to_number,
    truthy,
)

Json = Any

# NCCL symmetric-memory, cross-node NVLink and UCX device settings only make
# sense on GB200/GB300 NVL4 trays; pd_cluster drops them everywhere else.
NVL4_ONLY_ENV_KEYS = (
    "VLLM_USE_NCCL_SYMM_MEM",
    "NCCL_CUMEM_ENABLE",
    "NCCL_MNNVL_ENABLE",
    "NCCL_NVLS_ENABLE",
    "UCX_NET_DEVICES",
)
NVL4_HARDWARE_IDS = frozenset({"gb200", "gb300"})

# Largest deployment the recipes site offers, per deployment and per PD pool.
MAX_NODES = 16

PD_ROLES = ("prefill", "decode")
PD_ROLE_PORTS = {"prefill": 8001, "decode": 8002}
FRONTEND_ENV = "VLLM_USE_RUST_FRONTEND"
FRONTENDS = ("rust", "python")

_SAFE_SHELL_WORD = re.compile(r"^[A-Za-z0-9_./=:@,+%-]+$")
_SHELL_VARIABLE = re.compile(r"^\$[A-Z_][A-Z0-9_]*$")


# --------------------------------------------------------------------------
# Hardware-keyed lookups
# --------------------------------------------------------------------------

def generation_of(profile: Mapping[str, Any]) -> Any:
    """A profile's generation; consumer cards may list several, the first counts."""
    gen = first(get(profile, "generation"), get(profile, "gpu_generation"))
    return gen[0] if isinstance(gen, list) and gen else gen


def brand_key(profile: Mapping[str, Any]) -> Optional[str]:
    brand = get(profile, "brand")
    return brand.lower() if isinstance(brand, str) else None


def hardware_keyed(mapping: Any, profile: Mapping[str, Any], hardware_id: Any) -> Any:
    """Look a hardware-keyed map up by exact id, then generation, brand, ``default``."""
    if not isinstance(mapping, dict):
        return None
    gen = generation_of(profile)
    brand = brand_key(profile)
    return present(
        mapping.get(hardware_id) if hardware_id is not None else None,
        mapping.get(gen) if truthy(gen) and _hashable(gen) else None,
        mapping.get(brand) if brand else None,
        mapping.get("default"),
    )


def generation_override(overrides: Any, profile: Mapping[str, Any]) -> Any:
    """A ``hardware_overrides`` block for the profile's generation (NVIDIA: or ``nvidia``)."""
    gen = generation_of(profile)
    block = get(overrides, gen) if _hashable(gen) else None
    if truthy(block):
        return block
    return get(overrides, "nvidia") if get(profile, "brand") == "NVIDIA" else None


def _hashable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


# --------------------------------------------------------------------------
# Strategy, hardware and feature gates (shared with the selection layer)
# --------------------------------------------------------------------------

def gpu_count_of(profile: Mapping[str, Any], fallback: int = 1) -> Any:
    count = get(profile, "gpu_count")
    return count if is_number(count) else fallback


def single_node_tp(recipe: Mapping, variant: Mapping, profile: Mapping,
                   strategy_name: str = "single_node_tp", hardware_id: Any = None) -> Any:
    """TP size of a single-node strategy: declared sizes first, else fit by VRAM."""
    gpu_count = gpu_count_of(profile)
    if strategy_name != "single_node_tp":
        return gpu_count
    is_cpu = get(profile, "generation") == "cpu"
    declared_sources = (
        get(variant, "tp"),
        get(get(get(recipe, "strategy_overrides"), strategy_name), "tp"),
    )
    for raw in declared_sources:
        declared = raw if is_number(raw) else hardware_keyed(raw, profile, hardware_id)
        if is_number(declared) and declared > 0:
            return declared if is_cpu else min(declared, gpu_count)
    vram = get(profile, "vram_gb")
    per_gpu = vram / gpu_count if truthy(vram) and truthy(gpu_count) and is_number(vram) else 0
    needed = first(get(variant, "vram_minimum_gb"), 0)
    if not truthy(needed) or not truthy(per_gpu) or per_gpu <= 0:
        return gpu_count
    return 1 if needed <= per_gpu else gpu_count


def effective_compatible_strategies(recipe: Mapping) -> list[str]:
    """``compatible_strategies`` plus strategies granted ``supported`` per hardware."""
    listed = first(get(recipe, "compatible_strategies"), [])
    listed = list(listed) if isinstance(listed, list) else []
    grants = get(recipe, "strategy_hardware")
    opt_ins = [
        name for name, gate in (grants.items() if isinstance(grants, dict) else [])
        if name not in listed and isinstance(gate, dict) and "supported" in gate.values()
    ]
    return listed + opt_ins


def strategy_supported_on(recipe: Mapping, strategy_name: str, profile: Mapping, hardware_id: Any) -> bool:
    gate = hardware_keyed(get(get(recipe, "strategy_hardware"), strategy_name), profile, hardware_id)
    if gate is not None:
        return gate != "unsupported"
    return strategy_name in first(get(recipe, "compatible_strategies"), [])


def min_gpus_for(recipe: Mapping, key: str, gpu_id: Any = None) -> Any:
    """The recipe's GPU floor (``strategy_min_gpus``) for a strategy or PD pool mode."""
    floors = get(recipe, "strategy_min_gpus")
    if floors is None:
        return 0
    if is_number(floors):
        return floors

    def from_block(block: Any) -> Any:
        if block is None:
            return 0
        if is_number(block):
            return block
        return present(get(block, key), get(block, f"multi_node_{key}"), get(block, f"single_node_{key}"), 0)

    return as_int_if_whole(js_max(from_block(floors), from_block(get(floors, gpu_id)) if truthy(gpu_id) else 0))


def nodes_for_strategy(recipe: Mapping, key: str, gpus_per_node: Any, gpu_id: Any = None) -> int:
    nodes = math.ceil(to_number(min_gpus_for(recipe, key, gpu_id)) / to_number(first(gpus_per_node, 8)))
    return nodes if nodes else 1


def strategy_reachable(recipe: Mapping, key: str, deploy_type: Any, gpus_per_node: Any, gpu_id: Any = None) -> bool:
    max_nodes = MAX_NODES if deploy_type in ("multi_node", "pd_cluster") else 1
    return max_nodes * to_number(first(gpus_per_node, 8)) >= to_number(min_gpus_for(recipe, key, gpu_id))


def pd_pool_modes(recipe: Mapping) -> list[str]:
    """Parallelism modes a PD pool may use, derived from the strategy suffixes offered."""
    modes = set()
    for name in effective_compatible_strategies(recipe):
        if name == "pd_cluster" or not isinstance(name, str):
            continue
        if re.search(r"(?:^|_)dep$", name):
            modes.add("dep")
        elif re.search(r"(?:^|_)tep$", name):
            modes.add("tep")
        elif re.search(r"(?:^|_)tp(?:_pp|_dp)?$", name):
            modes.add("tp")
    ordered = [m for m in ("tp", "tep", "dep") if m in modes] or ["tp"]
    restrict = get(get(get(recipe, "strategy_overrides"), "pd_cluster"), "pool_modes")
    if isinstance(restrict, list) and restrict:
        narrowed = [m for m in ordered if m in restrict]
        if narrowed:
            ordered = narrowed
    return ordered


def feature_allowed_for_strategy(feature: Any, strategy_name: str) -> bool:
    allow = get(feature, "strategies")
    return not isinstance(allow, list) or not allow or strategy_name in allow


def kv_offload_allowed_for_strategy(option: Any, strategy_name: str, strategy: Mapping) -> bool:
    if not truthy(option):
        return False
    if get(strategy, "deploy_type") in ("pd_cluster", "kv_store_lb"):
        return False
    allow = get(option, "strategies")
    return not isinstance(allow, list) or not allow or strategy_name in allow


def kv_offload_supported_for_recipe(option: Any, option_key: Any, recipe: Mapping) -> bool:
    if not truthy(option):
        return False
    support = get(get(recipe, "kv_offload_support"), option_key) if _hashable(option_key) else None
    if support == "unsupported":
        return False
    return support == "verified" if truthy(get(option, "requires_opt_in")) else True


def kv_offload_brand_supported(option: Any, profile: Mapping) -> bool:
    allow = get(option, "brands")
    return not isinstance(allow, list) or not allow or get(profile, "brand") in allow


def mode_supported(mode: Any, profile: Mapping, hardware_id: Any) -> bool:
    gates = get(mode, "hardware")
    if not isinstance(gates, dict):
        return True
    gen = generation_of(profile)
    if truthy(gen) and _hashable(gen) and gates.get(gen) == "unsupported":
        return False
    if truthy(hardware_id) and gates.get(hardware_id) == "unsupported":
        return False
    return True


def mode_allowed_for_variant(mode: Any, variant_key: Any) -> bool:
    allow = get(mode, "variants")
    return not isinstance(allow, list) or not allow or variant_key in allow


def resolve_mode_key(feature: Any, feature_key: str, variant: Any, variant_key: Any,
                     profile: Mapping, hardware_id: Any, selected: Any) -> Optional[str]:
    """The active mode of a single-select feature on this variant and hardware."""
    modes = get(feature, "modes")
    if not isinstance(modes, dict):
        return None
    allowed = [
        key for key, mode in modes.items()
        if mode_allowed_for_variant(mode, variant_key) and mode_supported(mode, profile, hardware_id)
    ]
    if not allowed:
        return None
    for candidate in (selected, get(get(variant, "default_modes"), feature_key), get(feature, "default_mode")):
        if truthy(candidate) and candidate in allowed:
            return candidate
    return allowed[0]


def resolve_frontend(recipe: Mapping, selected: Any, profile: Mapping, hardware_id: Any,
                     strategy_name: Any = None) -> Optional[str]:
    """The API-server frontend: explicit choice, then strategy/hardware overrides, then the model default."""
    if truthy(selected):
        return selected
    strategy_block = get(get(recipe, "strategy_overrides"), strategy_name) if _hashable(strategy_name) else None
    for overrides in (get(strategy_block, "hardware_overrides"), get(recipe, "hardware_overrides")):
        chosen = get(hardware_keyed(overrides, profile, hardware_id), "frontend")
        if truthy(chosen):
            return chosen
    default = get(get(recipe, "model"), "default_frontend")
    if isinstance(default, dict):
        default = hardware_keyed(default, profile, hardware_id)
    return default if truthy(default) else None


def follower_ranks(nodes: Any) -> list[int]:
    """Ranks 1..n-1: every follower node renders its own command."""
    count = int(js_max(0, to_number(first(nodes, 1)) - 1))
    return list(range(1, count + 1))


# --------------------------------------------------------------------------
# argv and command-string layout
# --------------------------------------------------------------------------

def dedupe_flags(args: list[Any]) -> list[Any]:
    """Keep the last occurrence of every flag (with its value), like a shell would.

    A flag takes the next token as its value unless that token is a flag too.
    """
    units: list[tuple[Any, int, int]] = []  # (flag or None, start, end)
    seen: set[str] = set()
    repeated = False
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
            repeated = repeated or current in seen
            seen.add(current)
            units.append((current, i, end))
            i = end
        else:
            units.append((None, i, i + 1))
            i += 1
    if not repeated:
        return list(args)
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
    return dedupe_flags([a for a in args if (a if isinstance(a, str) else truthy(a))])


def format_command(model_id: Any, args: list[Any], *, final: bool = False) -> str:
    """The recipes site's layout: one flag and its value per continuation line."""
    words = args if final else final_args(args)
    head = f"vllm serve {text(model_id)}"
    if not words:
        return head
    lines: list[str] = []
    count = len(words)
    i = 0
    while i < count:
        current = words[i]
        if not isinstance(current, str):
            raise TypeError(f"argv contains a non-string token {current!r}; every token must be a string")
        if current[:1] == "-" and i + 1 < count:
            nxt = words[i + 1]
            if not isinstance(nxt, str):
                raise TypeError(f"argv contains a non-string token {nxt!r}; every token must be a string")
            if nxt[:1] != "-":
                lines.append(current + " " + shell_quote(nxt))
                i += 2
                continue
        lines.append(current)
        i += 1
    return head + " \\\n  " + " \\\n  ".join(lines)


def format_argv(model_id: Any, args: list[Any], *, final: bool = False) -> list[Any]:
    return ["vllm", "serve", model_id, *(args if final else final_args(args))]


# --------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------

def _pd_role_request(pd_nodes: Any, role: str) -> dict:
    """One PD pool's request: a bare node count, or ``{nodes, rank, parallelism}``."""
    raw = get(pd_nodes, role) if truthy(pd_nodes) else None
    if is_number(raw):
        return {"nodes": raw}
    if isinstance(raw, dict):
        return raw
    return {}


class _Synthesis:
    """One resolution's inputs, resolved once and shared by every process it renders."""

    def __init__(self, recipe: Mapping, variant_key: Any, strategy_name: Any, hardware_id: Any,
                 features: Any, strategies: Mapping, taxonomy: Mapping, advanced_args: Any,
                 node_count: Any, pd_nodes: Any, feature_modes: Any, kv_offload: Any,
                 kv_instances: Any, frontend: Any) -> None:
        self.__dict__.update(_layout(recipe, variant_key, strategy_name, hardware_id, strategies, taxonomy))
        self.node_count = node_count
        self.total_gpus = as_int_if_whole(self.gpu_count * js_max(1, node_count))
        self.features = features
        self.feature_modes = feature_modes
        self.advanced_args = advanced_args
        self.pd_nodes = pd_nodes
        self.is_multi = self.deploy_type == "multi_node" and to_number(node_count) > 1

        store = get(strategies, kv_offload) if truthy(kv_offload) and _hashable(kv_offload) else None
        self.kv_store = store if get(store, "deploy_type") == "kv_store_lb" else None
        self.kv_composing = self.kv_store is not None and self.deploy_type != "pd_cluster"
        option = get(get(taxonomy, "kv_offload"), kv_offload) if _hashable(kv_offload) else None
        self.kv_offload = kv_offload
        self.kv_option = option if (
            truthy(option)
            and kv_offload_allowed_for_strategy(option, strategy_name, self.strategy)
            and kv_offload_supported_for_recipe(option, kv_offload, recipe)
            and kv_offload_brand_supported(option, self.profile)
        ) else None

        request = kv_instances if truthy(kv_instances) and isinstance(kv_instances, (dict, list)) else {"count": kv_instances}
        count = get(request, "count")
        if is_number(count) and count >= 1:
            self.kv_instance_count = int(math.floor(count))
        else:
            self.kv_instance_count = first(get(self.kv_store, "default_instances"), 2)
        self.kv_current_instance = as_int_if_whole(
            js_max(0, js_min(to_number(self.kv_instance_count) - 1, present(get(request, "current"), 0))))
        self.frontend = frontend if truthy(frontend) else self._default_frontend
        self._features: Optional[list[dict]] = None

    # ---------------------------------------------------------------- helpers

    def _master_addr(self) -> str:
        if self.kv_composing and to_number(self.kv_instance_count) > 1:
            return f"$VLLM_INSTANCE_{number_text(as_int_if_whole(to_number(self.kv_current_instance) + 1))}"
        return "$HEAD_IP"

    def _role_config(self, role: str) -> tuple[Any, Any]:
        """(recipe's strategy_overrides.<strategy>.<role>, strategy YAML's <role>)."""
        return first(get(self.overrides, role), {}), first(get(self.strategy, role), {})

    def _install_for_brand(self, raw: Any) -> Any:
        if isinstance(raw, (dict, list)):
            brand = get(self.profile, "brand")
            key = "amd" if brand == "AMD" else "nvidia" if brand == "NVIDIA" else None
            return first(get(raw, key), None) if key else None
        return first(raw, None)

    # ------------------------------------------------------------------- args

    def args(self, role: Optional[str], node_role: Optional[str], node_rank: Any = 1) -> list[Any]:
        """The argv of one process, before dedupe, in the recipes site's layer order:
        model, variant, strategy + parallel layout, strategy overrides, hardware
        overrides, advanced args, features, then KV connectors (which must win
        the last-wins dedupe)."""
        strategy = self.strategy
        args: list[Any] = list(self._model_and_variant_args)
        if self.deploy_type != "pd_cluster":
            args += self._strategy_args
        elif role and truthy(get(get(strategy, role), "vllm_args")):
            args += items(get(get(strategy, role), "vllm_args"))
        args += self._parallel_args(role, node_role, node_rank)
        if role is None:
            args += self._override_args
        elif truthy(self.overrides):
            block = get(self.overrides, role)
            args += items(first(get(block, "extra_args"), None))
            args += items(first(get(block, "vllm_args"), None))
        args += self._hardware_args
        if role:
            args += items(first(get(self._role_exact(role), "extra_args"), None))
        args += self._advanced_feature_kv_args
        if self.deploy_type == "pd_cluster" and role:
            pd_args = get(get(get(self.kv_store, "pd"), role), "args")
            if truthy(pd_args):
                args += items(pd_args)
        return args

    @cached_property
    def _advanced_feature_kv_args(self) -> list[Any]:
        args: list[Any] = []
        advanced = self.advanced_args
        if truthy(advanced) and truthy(_length(advanced)):
            args += items(advanced)
        for block in self._active_features():
            args += items(first(block["args"], None))
        if self.kv_option is not None:
            args += items(first(get(self.kv_option, "args"), []))
        if self.kv_composing:
            args += items(first(get(get(self.kv_store, "vllm"), "vllm_args"), []))
        return args

    def _role_exact(self, role: Optional[str]) -> Any:
        if not role or not _hashable(self.hardware_id):
            return None
        return get(get(get(self.overrides, role), "hardware_overrides"), self.hardware_id)

    def _active_features(self) -> list[dict]:
        if self._features is None:
            self._features = self._collect_features()
        return self._features

    def _collect_features(self) -> list[dict]:
        """The ``{args, env}`` each enabled feature contributes here, in feature order.

        A feature with ``modes`` contributes its active mode (nothing when no
        mode runs here); a plain feature contributes itself or its per-hardware
        replacement.
        """
        active = []
        for key in items(first(self.features, [])):
            feature = get(get(self.recipe, "features"), key) if _hashable(key) else None
            if not truthy(feature):
                continue
            if not feature_allowed_for_strategy(feature, self.strategy_name):
                continue
            if self.kv_composing and truthy(get(get(feature, "companion"), "command")):
                continue
            modes = get(feature, "modes")
            if modes is not None and isinstance(modes, (dict, list)):
                selected = get(self.feature_modes, key)
                mode_key = resolve_mode_key(feature, key, self.variant, self.variant_key,
                                            self.profile, self.hardware_id, selected)
                mode = get(modes, mode_key) if mode_key is not None else None
                if truthy(mode):
                    active.append(self._hardware_replacement(mode))
                continue
            active.append(self._hardware_replacement(feature))
        return active

    def _hardware_replacement(self, block: Any) -> dict:
        """A feature/mode's args and env, replaced per hardware when it declares so."""
        replacement = hardware_keyed(get(block, "hardware_overrides"), self.profile, self.hardware_id)
        return {
            "args": present(get(replacement, "args"), get(block, "args")),
            "env": present(get(replacement, "env"), get(block, "env")),
        }

    def _parallel_args(self, role: Optional[str], node_role: Optional[str], node_rank: Any) -> list[str]:
        parallel_flag = self._parallel_flag
        if not self.is_multi and self.deploy_type != "pd_cluster":
            return [parallel_flag, text(self.single_node_tp)]
        mp_rank = as_int_if_whole(js_max(1, node_rank)) if node_role == "worker" else 0
        master = self._master_addr()
        nodes = self.node_count
        parallelism = self._parallelism
        out: list[str] = []
        if self.is_multi and parallel_flag == "--data-parallel-size":
            dp_local = self._dep_local_size()
            out += ["--data-parallel-size", number_text(self.total_gpus),
                    "--data-parallel-size-local", number_text(self.gpu_count),
                    "--data-parallel-address", master]
            if node_role == "worker":
                out += ["--data-parallel-start-rank", number_text(as_int_if_whole(mp_rank * dp_local))]
        elif self.is_multi and parallelism == "tp_pp":
            out += ["--tensor-parallel-size", number_text(self.gpu_count),
                    "--pipeline-parallel-size", text(nodes),
                    "--nnodes", text(nodes),
                    "--node-rank", number_text(mp_rank),
                    "--master-addr", master]
            if mp_rank > 0:
                out.append("--headless")
        elif self.is_multi and parallelism == "tp_dp":
            out += ["--tensor-parallel-size", number_text(self.gpu_count),
                    "--data-parallel-size", text(nodes),
                    "--data-parallel-size-local", "1",
                    "--data-parallel-address", master]
            if node_role == "worker":
                out += ["--data-parallel-start-rank", number_text(mp_rank)]
        elif self.is_multi:
            out += ["--tensor-parallel-size", number_text(self.total_gpus),
                    "--nnodes", text(nodes),
                    "--node-rank", number_text(mp_rank),
                    "--master-addr", master]
            if mp_rank > 0:
                out.append("--headless")
        elif self.deploy_type == "pd_cluster":
            out += self._pd_pool_args(role)
        else:
            out += [parallel_flag, text(self.single_node_tp)]
        return out

    def _dep_local_size(self) -> Any:
        """DP ranks per node: the recipe may pin ``--data-parallel-size-local``."""
        block = self.overrides
        overrides = get(block, "hardware_overrides")
        exact = get(overrides, self.hardware_id) if _hashable(self.hardware_id) else None
        declared = (
            items(first(get(block, "vllm_args"), []))
            + items(first(get(block, "extra_args"), []))
            + items(first(get(generation_override(overrides, self.profile), "extra_args"), []))
            + items(first(get(exact, "extra_args"), []))
        )
        flag = "--data-parallel-size-local"
        if flag in declared:
            index = len(declared) - 1 - declared[::-1].index(flag)
            value = declared[index + 1] if index + 1 < len(declared) else None
            return as_int_if_whole(to_number(value)) if index + 1 < len(declared) else math.nan
        return self.gpu_count

    def _pool_nodes(self, request: dict) -> Any:
        legacy = 1 if to_number(self.node_count) > 1 else 0
        nodes = request.get("nodes")
        return nodes if is_number(nodes) else legacy

    def _pd_pool_args(self, role: Optional[str]) -> list[str]:
        if role is None:
            raise TypeError("pd_cluster needs a role (prefill or decode) for every process")
        request = _pd_role_request(self.pd_nodes, role)
        override_cfg, strategy_cfg = self._role_config(role)
        pool_nodes = self._pool_nodes(request)
        pool_gpus = (as_int_if_whole(math.floor(self.gpu_count / 2)) if pool_nodes == 0
                     else as_int_if_whole(pool_nodes * self.gpu_count))
        parallelism = first(request.get("parallelism"), get(override_cfg, "parallelism"),
                            get(strategy_cfg, "parallelism"), "tp")
        allowed = self._pool_modes
        if parallelism not in allowed:
            parallelism = allowed[0]
        upper = role.upper()
        out: list[str] = []
        if parallelism == "dep":
            pool = as_int_if_whole(js_max(1, pool_nodes))
            explicit_tp = get(override_cfg, "tp")
            if explicit_tp is None:
                explicit_tp = get(strategy_cfg, "tp")
            tp_declared = isinstance(override_cfg, dict) and "tp" in override_cfg and override_cfg["tp"] is not None \
                or isinstance(strategy_cfg, dict) and "tp" in strategy_cfg
            role_tp = explicit_tp if explicit_tp is not None else 1
            dp_local = as_int_if_whole(js_max(1, math.floor(self.gpu_count / to_number(role_tp))))
            node_index = as_int_if_whole(js_max(0, js_min(to_number(pool) - 1, present(request.get("rank"), 0))))
            if tp_declared:
                out += ["--tensor-parallel-size", text(role_tp)]
            out += ["--data-parallel-size", number_text(as_int_if_whole(pool * dp_local)),
                    "--data-parallel-size-local", number_text(dp_local),
                    "--data-parallel-start-rank", number_text(as_int_if_whole(node_index * dp_local)),
                    "--data-parallel-address", f"${upper}_NODE_1",
                    "--data-parallel-rpc-port", f"${upper}_DP_RPC_PORT"]
            if pool > 1:
                out.append("--data-parallel-hybrid-lb")
            out.append("--enable-expert-parallel")
            return out
        flag = first(get(override_cfg, "parallel_flag"), get(strategy_cfg, "parallel_flag"),
                     get(self.strategy, "parallel_flag"), "--tensor-parallel-size")
        out += [flag, number_text(as_int_if_whole(js_max(1, pool_gpus)))]
        if parallelism == "tep":
            out.append("--enable-expert-parallel")
        if to_number(pool_nodes) > 1:
            node_index = as_int_if_whole(js_max(0, js_min(to_number(pool_nodes) - 1, present(request.get("rank"), 0))))
            out += ["--nnodes", text(pool_nodes), "--node-rank", number_text(node_index),
                    "--master-addr", f"${upper}_NODE_1"]
            if node_index > 0:
                out.append("--headless")
        return out

    # -------------------------------------------------------------------- env

    def env(self, role: Optional[str]) -> dict:
        """The environment of one process, layered like its args."""
        strategy = self.strategy
        env: dict = dict(self._model_and_variant_env)
        if self.deploy_type != "pd_cluster":
            _merge(env, get(strategy, "env"))
        elif role:
            _merge(env, get(get(strategy, role), "env"))
        if self.kv_option is not None:
            _merge(env, get(self.kv_option, "env"))
        if self.kv_composing or (self.deploy_type == "pd_cluster" and role and truthy(get(self.kv_store, "pd"))):
            _merge(env, get(get(self.kv_store, "vllm"), "env"))
        if self.deploy_type == "pd_cluster" and role:
            self._pin_pool_devices(env, role)
        overrides = self.overrides
        if truthy(overrides):
            _merge(env, get(overrides, "env"))
            if role:
                _merge(env, get(get(overrides, role), "env"))
            else:
                _merge(env, get(overrides, "extra_env"))
        env.update(self._hardware_env)
        if role:
            _merge(env, get(self._role_exact(role), "extra_env"))
        for block in self._active_features():
            _merge(env, block["env"])
        if self.frontend in FRONTENDS:
            env[FRONTEND_ENV] = "1" if self.frontend == "rust" else "0"
        if self.deploy_type == "pd_cluster" and self.hardware_id not in NVL4_HARDWARE_IDS:
            for key in NVL4_ONLY_ENV_KEYS:
                env.pop(key, None)
        if self.deploy_type == "pd_cluster" and role:
            self._point_at_own_node(env, role)
        return env

    def _pin_pool_devices(self, env: dict, role: str) -> None:
        """Whole nodes own every local GPU; a co-located pool takes its half."""
        pool_nodes = self._pool_nodes(_pd_role_request(self.pd_nodes, role))
        count = int(to_number(self.gpu_count)) if is_number(self.gpu_count) else 1
        if to_number(pool_nodes) >= 1:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(count))
            if to_number(pool_nodes) >= 2:
                env["GLOO_SOCKET_IFNAME"] = "$IFACE_NAME"
                env["NCCL_SOCKET_IFNAME"] = "$IFACE_NAME"
            return
        half = math.floor(self.gpu_count / 2)
        if half > 0:
            ids = range(half) if role == "prefill" else range(half, count)
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in ids)

    def _point_at_own_node(self, env: dict, role: str) -> None:
        """A non-zero DEP rank binds per-node values to its own node, not node 1."""
        request = _pd_role_request(self.pd_nodes, role)
        rank = first(request.get("rank"), 0)
        override_cfg, strategy_cfg = self._role_config(role)
        parallelism = first(request.get("parallelism"), get(override_cfg, "parallelism"),
                            get(strategy_cfg, "parallelism"), "tp")
        if not (to_number(rank) > 0 and parallelism == "dep"):
            return
        upper = role.upper()
        old, new = f"${upper}_NODE_1", f"${upper}_NODE_{text(as_int_if_whole(to_number(rank) + 1))}"
        for key, value in env.items():
            if value == old:
                env[key] = new

    # --------------------------------------------------------------- outputs

    def rendered(self, args: list[Any]) -> tuple[str, list[Any]]:
        """(command string, argv) of one process, from one dedupe pass."""
        words = final_args(args)
        return format_command(self.model_id, words, final=True), format_argv(self.model_id, words, final=True)

    def resolve(self) -> dict:
        if self.deploy_type == "pd_cluster":
            return self._pd_cluster()
        if self.kv_composing:
            return self._kv_store()
        if self.deploy_type == "multi_node" and to_number(self.node_count) > 1:
            return self._multi_node()
        return self._single_node()

    def _pool_meta(self, role: str) -> dict:
        """Sizes of one PD pool as the recipes site reports them."""
        override_cfg, strategy_cfg = self._role_config(role)
        request = _pd_role_request(self.pd_nodes, role)
        nodes = self._pool_nodes(request)
        parallelism = first(request.get("parallelism"), get(override_cfg, "parallelism"),
                            get(strategy_cfg, "parallelism"), "tp")
        pool_gpus = (as_int_if_whole(math.floor(self.gpu_count / 2)) if nodes == 0
                     else as_int_if_whole(nodes * self.gpu_count))
        is_dep = parallelism == "dep"
        tp = first(get(override_cfg, "tp"), get(strategy_cfg, "tp"), 1) if is_dep else pool_gpus
        dp_local = as_int_if_whole(js_max(1, math.floor(self.gpu_count / to_number(tp)))) if is_dep else 0
        dp_size = as_int_if_whole(js_max(1, nodes) * dp_local) if is_dep else 1
        in_pool = js_max(1, nodes)
        current = as_int_if_whole(js_max(0, js_min(in_pool - 1, present(request.get("rank"), 0))))
        return {
            "nodes": nodes, "parallelism": parallelism, "tp": tp, "dpLocal": dp_local,
            "dpSize": dp_size, "poolGpus": pool_gpus, "currentNode": current,
            "startRank": as_int_if_whole(current * dp_local),
        }

    def _pd_cluster(self) -> dict:
        policy = first(get(get(self.strategy, "router"), "policy"), "round_robin")
        meta = {role: self._pool_meta(role) for role in PD_ROLES}

        def endpoints(role: str) -> list[str]:
            pool = meta[role]
            count = int(js_max(1, first(pool["nodes"], 1))) if pool["parallelism"] == "dep" else 1
            flag = f"--{role}"
            return [f"    {flag} http://${role.upper()}_NODE_{i + 1}:{PD_ROLE_PORTS[role]} \\" for i in range(count)]

        intra_dp = get(get(self.overrides, "router"), "intra_node_data_parallel_size")
        if intra_dp is None:
            intra_dp = as_int_if_whole(js_max(first(meta["prefill"]["dpLocal"], 0), first(meta["decode"]["dpLocal"], 0), 1))
        router_lines = [
            f"vllm-router --policy {text(policy)} \\",
            "    --vllm-pd-disaggregation \\",
            *endpoints("prefill"),
            *endpoints("decode"),
            "    --host $ROUTER_HOST \\",
            "    --port $ROUTER_PORT \\",
            f"    --intra-node-data-parallel-size {text(intra_dp)}",
        ]
        role_args = {role: self.args(role, None) for role in PD_ROLES}
        result: dict = {"deployType": "pd_cluster", "nodeCount": self.node_count}
        if truthy(get(self.kv_store, "pd")):
            result["mooncake"] = {**self._mooncake_services(), **{
                "config": first(get(get(self.kv_store, "mooncake_vllm_config"), "template"), {}),
                "configNote": first(get(get(self.kv_store, "mooncake_vllm_config"), "note"), ""),
                "install": self._install_for_brand(get(get(self.kv_store, "vllm"), "install")),
            }}
        for role in PD_ROLES:
            command, argv = self.rendered(role_args[role])
            result[role] = {
                "command": command,
                "argv": argv,
                "env": self.env(role),
                **meta[role],
            }
        result["router"] = {"command": "\n".join(router_lines), "install": "uv pip install vllm-router"}
        result["routerConfig"] = first(get(self.strategy, "router"), {"policy": "round_robin"})
        return result

    def _mooncake_services(self) -> dict:
        store = self.kv_store
        master = get(store, "mooncake_master")
        store_cfg = get(store, "mooncake_store_config")
        return {
            "master": {
                "command": first(get(master, "command"), "mooncake_master"),
                "description": first(get(master, "description"), ""),
            },
            "store": {
                "command": get(store_cfg, "command"),
                "description": first(get(store_cfg, "description"), ""),
                "config": first(get(store_cfg, "config"), None),
                "note": first(get(store_cfg, "note"), ""),
            } if truthy(store_cfg) else None,
        }

    def _kv_store(self) -> dict:
        store = self.kv_store
        instances = self.kv_instance_count
        multi = self.deploy_type == "multi_node" and to_number(self.node_count) > 1
        head_args = self.args(None, "head" if multi else None)
        command, argv = self.rendered(head_args)
        vllm: dict = {"command": command, "argv": argv}
        if multi:
            workers = [self.rendered(self.args(None, "worker", rank)) for rank in follower_ranks(self.node_count)]
            vllm.update({
                "workerCommand": workers[0][0],
                "workerArgv": workers[0][1],
                "workerCommands": [w[0] for w in workers],
                "workerArgvs": [w[1] for w in workers],
            })
        vllm["env"] = self.env(None)
        vllm["install"] = self._install_for_brand(get(get(store, "vllm"), "install"))
        router_cfg = get(store, "router")
        router_port = first(get(router_cfg, "port"), 30080)
        vllm_port = first(get(get(store, "vllm"), "port"), 8000)
        count = int(to_number(instances)) if is_number(instances) else 0
        router_lines = [
            f"vllm-router --policy {text(first(get(router_cfg, 'policy'), 'cache_aware'))} \\",
            *[f"    --backend-url http://$VLLM_INSTANCE_{i + 1}:{text(vllm_port)} \\" for i in range(count)],
            "    --host $ROUTER_HOST \\",
            "    --port $ROUTER_PORT \\",
            "    --cache-threshold 0.5 \\",
            "    --balance-abs-threshold 4 \\",
            "    --balance-rel-threshold 1.1",
        ]
        services = self._mooncake_services()
        return {
            "deployType": "kv_store_lb",
            "servingStrategy": self.strategy_name,
            "nodeCount": self.node_count,
            "instances": instances,
            "currentInstance": self.kv_current_instance,
            "master": services["master"],
            "store": services["store"],
            "vllm": vllm,
            "router": {
                "command": "\n".join(router_lines),
                "install": first(get(router_cfg, "install"), "uv pip install vllm-router"),
                "port": router_port,
            } if to_number(instances) > 1 else None,
            "mooncakeConfig": first(get(get(store, "mooncake_vllm_config"), "template"), {}),
            "mooncakeConfigNote": first(get(get(store, "mooncake_vllm_config"), "note"), ""),
        }

    def _multi_node(self) -> dict:
        head = self.rendered(self.args(None, "head"))
        workers = [self.rendered(self.args(None, "worker", rank)) for rank in follower_ranks(self.node_count)]
        return {
            "deployType": "multi_node",
            "nodeCount": self.node_count,
            "headCommand": head[0],
            "workerCommand": workers[0][0],
            "workerCommands": [w[0] for w in workers],
            "headArgv": head[1],
            "workerArgv": workers[0][1],
            "workerArgvs": [w[1] for w in workers],
            "env": self.env(None),
        }

    def _single_node(self) -> dict:
        command, argv = self.rendered(self.args(None, None))
        result = {
            "deployType": first(self.deploy_type, "single_node"),
            "command": command,
            "argv": argv,
            "env": self.env(None),
        }
        companions = self._companions()
        if companions:
            result["companions"] = companions
        return result

    def _companions(self) -> list[dict]:
        """Helper processes that run beside ``vllm serve`` on the same node."""
        out = []
        for key in items(first(self.features, [])):
            feature = get(get(self.recipe, "features"), key) if _hashable(key) else None
            companion = get(feature, "companion")
            if not truthy(get(companion, "command")):
                continue
            if not feature_allowed_for_strategy(feature, self.strategy_name):
                continue
            out.append({
                "feature": key,
                "label": first(get(companion, "label"), key),
                "description": first(get(companion, "description"), ""),
                "command": text(companion["command"]).rstrip(),
            })
        option = self.kv_option
        companion = get(option, "companion")
        if option is not None and truthy(get(companion, "command")):
            install = get(option, "install")
            description = [first(get(companion, "description"), ""), f"Requires: {text(install)}" if truthy(install) else ""]
            out.append({
                "feature": f"kv_offload:{text(self.kv_offload)}",
                "label": first(get(companion, "label"), self.kv_offload),
                "description": " ".join(d for d in description if truthy(d)),
                "command": text(companion["command"]).rstrip(),
            })
        return out


_LAYOUT_CACHE: dict[tuple, tuple[tuple, dict]] = {}
_LAYOUT_CACHE_SIZE = 4096


def _layout(recipe: Mapping, variant_key: Any, strategy_name: Any, hardware_id: Any,
            strategies: Mapping, taxonomy: Mapping) -> dict:
    """What a resolution knows before looking at features, node counts or KV choices.

    It depends only on the recipe, variant, strategy and hardware, so it is
    computed once per combination and shared (inputs are treated as read-only).
    """
    hashable = all(_hashable(v) for v in (variant_key, strategy_name, hardware_id))
    key = (id(recipe), variant_key, strategy_name, hardware_id, id(strategies), id(taxonomy)) if hashable else None
    if key is not None:
        hit = _LAYOUT_CACHE.get(key)
        if hit is not None and hit[0][0] is recipe and hit[0][1] is strategies and hit[0][2] is taxonomy:
            return hit[1]
    values = _compute_layout(recipe, variant_key, strategy_name, hardware_id, strategies, taxonomy)
    if key is not None:
        if len(_LAYOUT_CACHE) >= _LAYOUT_CACHE_SIZE:
            _LAYOUT_CACHE.clear()
        _LAYOUT_CACHE[key] = ((recipe, strategies, taxonomy), values)
    return values


def _compute_layout(recipe: Mapping, variant_key: Any, strategy_name: Any, hardware_id: Any,
                    strategies: Mapping, taxonomy: Mapping) -> dict:
    variants = get(recipe, "variants")
    variant = first(get(variants, variant_key) if _hashable(variant_key) else None, get(variants, "default"), {})
    strategy = first(get(strategies, strategy_name) if _hashable(strategy_name) else None, {})
    profile = first(get(get(taxonomy, "hardware_profiles"), hardware_id) if _hashable(hardware_id) else None, {})
    overrides = get(get(recipe, "strategy_overrides"), strategy_name) if _hashable(strategy_name) else None
    variant_exact = get(get(variant, "hardware_overrides"), hardware_id) if _hashable(hardware_id) else None
    model = get(recipe, "model")

    # Hardware overrides: a strategy's generation block replaces the recipe
    # baseline and the variant delta; the strategy's exact-GPU block adds on top.
    strategy_gen = generation_override(get(overrides, "hardware_overrides"), profile)
    generation_blocks = [strategy_gen] if truthy(strategy_gen) else [
        generation_override(get(recipe, "hardware_overrides"), profile),
        generation_override(get(variant, "hardware_overrides"), profile),
    ]
    exact = get(get(overrides, "hardware_overrides"), hardware_id) if _hashable(hardware_id) else None
    hardware_args: list[Any] = []
    hardware_env: dict = {}
    for block in (*generation_blocks, exact):
        hardware_args += items(first(get(block, "extra_args"), None))
        _merge(hardware_env, get(block, "extra_env"))
    static_env: dict = {}
    for block in (get(model, "base_env"), get(variant, "extra_env"), get(variant_exact, "extra_env")):
        _merge(static_env, block)
    return {
        "recipe": recipe,
        "variant_key": variant_key,
        "variant": variant,
        "strategy_name": strategy_name,
        "strategy": strategy,
        "hardware_id": hardware_id,
        "profile": profile,
        "gen": generation_of(profile),
        "is_nvidia": get(profile, "brand") == "NVIDIA",
        "gpu_count": gpu_count_of(profile),
        "deploy_type": get(strategy, "deploy_type"),
        "overrides": overrides,
        "single_node_tp": single_node_tp(recipe, variant, profile, strategy_name, hardware_id),
        "model_id": first(get(variant, "model_id"), get(model, "model_id"), "unknown"),
        "variant_exact": variant_exact,
        "_model_and_variant_args": (items(first(get(model, "base_args"), None))
                                    + items(first(get(variant, "extra_args"), None))
                                    + items(first(get(variant_exact, "extra_args"), None))),
        "_hardware_args": hardware_args,
        "_hardware_env": hardware_env,
        "_model_and_variant_env": static_env,
        "_default_frontend": resolve_frontend(recipe, None, profile, hardware_id, strategy_name),
        "_strategy_args": items(first(get(strategy, "vllm_args"), None)),
        "_override_args": (items(first(get(overrides, "extra_args"), None))
                           + items(first(get(overrides, "vllm_args"), None))) if truthy(overrides) else [],
        "_parallel_flag": first(get(strategy, "parallel_flag"), "--tensor-parallel-size"),
        "_parallelism": get(strategy, "parallelism"),
        "_pool_modes": pd_pool_modes(recipe) if get(strategy, "deploy_type") == "pd_cluster" else ["tp"],
    }


def _length(value: Any) -> Any:
    """``value.length`` for strings and lists; other values have none."""
    return len(value) if isinstance(value, (str, list, tuple)) else None


def _merge(env: dict, source: Any) -> None:
    """``Object.assign(env, source)`` for mapping sources; anything else adds nothing."""
    if isinstance(source, dict):
        env.update(source)


def resolve_command(recipe: Mapping, variant: Any, strategy: Any, hardware: Any, features: Any,
                    strategies: Mapping, taxonomy: Mapping, advanced_args: Any = (),
                    node_count: Any = 1, pd_nodes: Any = None, feature_modes: Any = None,
                    kv_offload: Any = None, kv_instances: Any = None, frontend: Any = None) -> dict:
    """Resolve one selection into the recipes site's output shape (camelCase keys).

    The positional order is the recipes site's own, so a conformance case can
    be replayed argument for argument. ``frontend`` ("rust" or "python") picks
    the API-server frontend; left unset, the recipe's ``default_frontend``
    decides.
    """
    synthesis = _Synthesis(recipe, variant, strategy, hardware, features, strategies, taxonomy,
                           advanced_args, node_count, pd_nodes, feature_modes or {}, kv_offload,
                           kv_instances, frontend)
    return synthesis.resolve()


ResolveFn = Callable[..., dict]
