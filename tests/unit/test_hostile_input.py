"""Hostile input (issue 12): every user-settable string is refused by key, or reaches its file unchanged.

Property-based (hypothesis): for each field that reaches a unit, an env file, a path, an argv
or an env, and for values built from LF, CR, NUL and other control characters, quotes,
``$(...)``, backticks, ``%`` specifiers, ``..``, separators and very long runs, rendering either

* fails with an error naming the inventory key (and never the secret), or
* renders files that systemd's and docker's own rules (``readers.py``) read back as exactly
  the value given.

A sample of what renders also goes through the real ``systemd-analyze verify``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import readers
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _plan_view as PV
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _unitfile as U
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
from systemd_root import SYSTEMD_ANALYZE, verify_units

SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------

NASTY = ["\n", "\r", "\x00", "\t", "\x1b", "\x7f", "\x85", "\u2028", "\ufeff", "\ufffe", '"', "'", "\\", "$", "$(id)",
         "${HOME}", "`id`", "%", "%n", "%%", "..", "/", ";", " ", "=", "#", "&&", "|", ":", ",", "é", "名"]
FRAGMENTS = st.sampled_from(NASTY) | st.text(min_size=1, max_size=4)
#: Short hostile strings, and now and then a very long one (over docker's 64 KiB line).
VALUES = (st.lists(FRAGMENTS, max_size=8).map("".join)
          | st.builds(lambda s, n: s * n, st.sampled_from(["x", "é", "%", "\\"]),
                      st.sampled_from([4096, 33000, 70000])))


def plan_with(deployment: dict[str, Any] | None = None, host: str = "a",
              hostvars: dict[str, Any] | None = None) -> P.FleetPlan:
    decl = {"recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200", "strategy": "single_node_tp",
            **(deployment or {})}
    vars_ = {"ansible_host": "10.40.0.1", "vllm_fabric_interface": "ens5", "vllm_deployment": decl,
             **(hostvars or {})}
    return P.build_plan({host: vars_}, {"all": [host], "g": [host]}, ENGINE)


def render_with(deployment: dict[str, Any] | None = None, host: str = "a",
                hostvars: dict[str, Any] | None = None) -> dict[str, str]:
    return R.render(plan_with(deployment, host, hostvars))


ENGINE = P.engine_factory()


def one(files: dict[str, str], suffix: str) -> str:
    """The one file whose name ends with suffix (an engine's watchdog unit is not it)."""
    (text,) = [t for p, t in files.items() if p.endswith(suffix) and not p.endswith("-watchdog" + suffix)]
    return text


def refused_or(value: str, key: str, build: Callable[[], dict[str, str]],
               check: Callable[[dict[str, str]], None], secret: bool = False) -> None:
    """The property: a refusal naming ``key`` (never the secret), or files that read back."""
    try:
        files = build()
    except (RecipeError, ValueError) as exc:
        message = str(exc)
        assert key in message, message
        assert "Traceback" not in message
        if secret and len(value) >= 6:
            assert value not in message, message
        return
    check(files)


def env_reads_back(files: dict[str, str], name: str, value: str) -> None:
    text = one(files, "vllm-g.env")
    assert readers.systemd_env_file(text)[name] == value
    assert readers.docker_env_file(text)[name] == value


# --------------------------------------------------------------------------------------
# fields that reach files, paths, argv and env
# --------------------------------------------------------------------------------------

@SETTINGS
@given(VALUES)
@example("INFO\nLD_PRELOAD=/tmp/x.so")
@example("INFO\rLD_PRELOAD=/tmp/x.so")
@example("a b #c ;d")
def test_extra_env_value(value):
    refused_or(value, "vllm_deployment.extra_env.NCCL_DEBUG",
               lambda: render_with({"extra_env": {"NCCL_DEBUG": value}}),
               lambda files: env_reads_back(files, "NCCL_DEBUG", value))


@SETTINGS
@given(VALUES.map(lambda v: "S3CR3T-" + v))
@example("S3CR3T-$(touch /tmp/pwned)'\"`id`")
def test_secret_extra_env_goes_to_the_secret_file_only(value):
    def check(files: dict[str, str]) -> None:
        secret = one(files, ".secret.env")
        assert readers.shim_env_file(secret)["WANDB_API_KEY"] == value
        for path, text in files.items():
            assert path.endswith(".secret.env") or value not in text, path

    refused_or(value, "vllm_deployment.extra_env.WANDB_API_KEY",
               lambda: render_with({"extra_env": {"WANDB_API_KEY": value}}), check, secret=True)


@SETTINGS
@given(VALUES.map(lambda v: "sk-" + v))
def test_api_key(value):
    def check(files: dict[str, str]) -> None:
        assert readers.shim_env_file(one(files, ".secret.env"))["VLLM_API_KEY"] == value
        assert not any(value in text for path, text in files.items() if not path.endswith(".secret.env"))

    refused_or(value, "vllm_deployment.api_key", lambda: render_with({"api_key": value}), check, secret=True)


@SETTINGS
@given(VALUES.map(lambda v: "sk-" + v))
def test_probe_header_sends_the_api_key_the_secret_file_holds(value):
    try:
        fleet = plan_with({"api_key": value})
    except (RecipeError, ValueError):
        return  # refused (test_api_key)
    key = readers.shim_env_file(one(R.render(fleet), ".secret.env"))["VLLM_API_KEY"]
    assert PV.probe_headers(fleet) == {"vllm-g.service": {"Authorization": f"Bearer {key}"}}


@SETTINGS
@given(VALUES)
@example("$(touch /tmp/pwned); `id` && echo '%n' \"x\"")
def test_advanced_args_token(value):
    def check(files: dict[str, str]) -> None:
        plan = json.loads(files["plan.json"])
        (proc, watchdog) = sorted(plan["deployments"]["g"]["processes"], key=lambda p: p["kind"])
        argv = readers.exec_argv(one(files, ".service"))
        assert argv == proc["exec_start"]
        assert argv[argv.index("--served-model-name") + 1] == value
        # the watchdog's completion probe asks for the served name: the same argv, read back whole
        probe = readers.exec_argv(one(files, "-watchdog.service"))
        assert probe == watchdog["exec_start"] and probe[probe.index("--model") + 1] == value

    refused_or(value, "vllm_deployment", lambda: render_with({"advanced_args": ["--served-model-name", value]}),
               check)


@SETTINGS
@given(VALUES)
@example("名前-ノード")
@example("a%nb")
def test_host_name(value):
    def check(files: dict[str, str]) -> None:
        unit_path = f"g/{value}/vllm-g.service"
        assert unit_path in files and all(".." not in p.split("/") for p in files)
        assert readers.directive(files[unit_path], "Description") == f"vLLM g: single on {value}"
        assert readers.docker_env_file(files[f"g/{value}/vllm-g.env"]) is not None

    refused_or(value, "inventory host name", lambda: render_with(host=value), check)


@SETTINGS
@given(VALUES.map(lambda v: "/etc/" + v))
def test_config_dir(value):
    def check(files: dict[str, str]) -> None:
        unit = one(files, ".service")
        path = f"{value.rstrip('/')}/g/vllm-g.env"  # a trailing '/' is dropped (documented)
        assert readers.directive(unit, "EnvironmentFile") == path
        argv = readers.exec_argv(unit)
        assert argv[argv.index("--env-file") + 1] == path

    refused_or(value, "vllm_deployment.config_dir", lambda: render_with({"config_dir": value}), check)


@SETTINGS
@given(VALUES.map(lambda v: "/data/" + v))
def test_weights_cache_dir(value):
    def check(files: dict[str, str]) -> None:
        argv = readers.exec_argv(one(files, ".service"))
        assert f"{value.rstrip('/')}:/root/.cache/huggingface" in argv

    refused_or(value, "vllm_deployment.weights.cache_dir",
               lambda: render_with({"weights": {"cache_dir": value}}), check)


@SETTINGS
@given(VALUES.map(lambda v: "/data/" + v))
def test_compile_cache_dir(value):
    def check(files: dict[str, str]) -> None:
        argv = readers.exec_argv(one(files, ".service"))
        assert f"{value.rstrip('/')}/vllm-g:/root/.cache/vllm" in argv

    refused_or(value, "vllm_deployment.compile_cache_dir",
               lambda: render_with({"compile_cache_dir": value}), check)


@SETTINGS
@given(VALUES.map(lambda v: "/srv/models/" + v))
def test_weights_import_source(value):
    """weights.source becomes a module argument on the origin: a plain absolute path, or refused."""
    def check(files: dict[str, str]) -> None:
        parts = value.split("/")
        assert value.startswith("/") and ".." not in parts and "." not in parts
        assert not any(ord(ch) < 32 or ord(ch) == 127 for ch in value)
        assert any(path.endswith(".service") for path in files)

    refused_or(value, "vllm_deployment.weights.source",
               lambda: render_with({"weights": {"mode": "import", "source": value}}), check)


@SETTINGS
@given(st.none() | st.booleans() | st.integers(-3, 5000) | st.floats(allow_nan=False) | VALUES,
       st.none() | st.integers(-3, 5000))
def test_unit_shutdown_timeout(value, stop):
    """The drain: refused at its key, or exactly that many seconds in the engine's argv, below
    the stop timeout its unit file gives docker stop."""
    unit = {"shutdown_timeout": value, **({"stop_timeout": stop} if stop is not None else {})}

    def check(files):
        text = one(files, "vllm-dep.service")
        argv, stopping = readers.exec_argv(text), readers.exec_argv(text, "ExecStop")
        stop_s = int(stopping[stopping.index("-t") + 1])
        # unset: the default drain (the recipe's image is nightly), below the stop timeout; '1', 1.0: 1
        seconds = min(30, stop_s - 1) if value is None else int(value)
        if seconds == 0:
            assert "--shutdown-timeout" not in argv
        else:
            assert argv[argv.index("--shutdown-timeout") + 1] == str(seconds) and seconds < stop_s

    refused_or(str(value), "vllm_deployment.unit", lambda: render_with({"name": "dep", "unit": unit}), check)


@SETTINGS
@given(VALUES | st.sampled_from(["-v", "--privileged", "a:b c", "reg:5000/x/y:tag", "x@sha256:" + "a" * 64]))
def test_image(value):
    def check(files: dict[str, str]) -> None:
        argv = readers.exec_argv(one(files, ".service"))
        assert value in argv and not value.startswith("-")

    refused_or(value, "vllm_deployment.image", lambda: render_with({"image": value}), check)


@SETTINGS
@given(VALUES)
def test_ib_hca_host_var(value):
    def check(files: dict[str, str]) -> None:
        if value.strip():  # blanks around a host variable are trimmed; an empty one is unset
            env_reads_back(files, "NCCL_IB_HCA", value.strip())
        else:
            assert "NCCL_IB_HCA" not in readers.docker_env_file(one(files, "vllm-g.env"))

    refused_or(value, "hostvars['a'].vllm_ib_hca",
               lambda: render_with({"rdma": True}, hostvars={"vllm_ib_hca": value}), check)


@SETTINGS
@given(VALUES)
def test_fabric_interface_host_var(value):
    refused_or(value, "hostvars['a'].vllm_fabric_interface",
               lambda: render_with(hostvars={"vllm_fabric_interface": value}),
               lambda files: None)


@SETTINGS
@given(VALUES)
def test_recipe_reference(value):
    refused_or(value, "vllm_deployment", lambda: render_with({"recipe": value}), lambda files: None)


# --------------------------------------------------------------------------------------
# the writer itself
# --------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None, database=None)
@given(VALUES)
def test_writer_env_value_reads_back_with_systemd_and_docker(value):
    try:
        text = U.env_file(["c"], [("NAME", value, "the.key")])
    except U.UnsafeValueError as exc:
        assert "the.key" in str(exc)
        return
    assert readers.systemd_env_file(text) == {"NAME": value}
    assert readers.docker_env_file(text) == {"NAME": value}


@settings(max_examples=200, deadline=None, database=None)
@given(VALUES)
def test_writer_secret_value_reads_back_with_the_shim(value):
    try:
        text = U.env_file(["c"], [("NAME", value, "the.key")], secret=True)
    except U.UnsafeValueError as exc:
        assert "the.key" in str(exc) and (len(value) < 6 or value not in str(exc))
        return
    assert readers.shim_env_file(text) == {"NAME": value}


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(VALUES, min_size=1, max_size=4))
def test_writer_exec_argv_reads_back(args):
    try:
        directive = U.exec_directive("ExecStart", ["/bin/prog", *args], "the.key")
        text = U.unit_file([], [("Service", [("ExecStart", directive)])])
    except U.UnsafeValueError as exc:
        assert "the.key" in str(exc)
        return
    assert readers.exec_argv(text) == ["/bin/prog", *args]


@settings(max_examples=200, deadline=None, database=None)
@given(VALUES)
def test_writer_plain_directive_reads_back(value):
    try:
        text = U.unit_file([("header", "h")], [("Unit", [("Description", value, "the.key")])])
    except U.UnsafeValueError as exc:
        assert "the.key" in str(exc)
        return
    assert readers.directive(text, "Description") == value


@settings(max_examples=100, deadline=None, database=None)
@given(VALUES)
def test_writer_refusals_show_control_characters_and_stay_short(value):
    try:
        U.check_text("the.key", value)
    except U.UnsafeValueError as exc:
        message = str(exc)
        assert "the.key" in message and "\n" not in message and "\r" not in message and "\x00" not in message
        assert len(message) < 700


# --------------------------------------------------------------------------------------
# the real systemd-analyze verify on a sample of what renders
# --------------------------------------------------------------------------------------

@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (Debian: systemd)")
@settings(max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(FRAGMENTS, min_size=1, max_size=6).map("".join), st.sampled_from(["a", "名前-ノード", "n%1"]))
@example(token="%n $(id) `id` \"q\" \\", host="n%1")
def test_rendered_units_pass_systemd_analyze_verify(target_root, token, host):
    try:
        files = render_with({"advanced_args": ["--served-model-name", token]}, host=host)
    except (RecipeError, ValueError):
        return
    # the served name reaches the watchdog's argv too (its completion probe asks for it)
    units = {"vllm-g.service": one(files, ".service"), "vllm-g-watchdog.service": one(files, "-watchdog.service")}
    result = verify_units(target_root, units)
    assert result.returncode == 0 and result.stderr == "", result.stderr


# --------------------------------------------------------------------------------------
# any shape, any key: a refusal (RecipeError / ValueError), never a traceback
# --------------------------------------------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2, 70000) | st.floats(allow_nan=False) | VALUES,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(VALUES, inner, max_size=3),
                    max_leaves=6)
DEPLOYMENT_KEYS = ["name", "group", "recipe", "variant", "hardware", "strategy", "features", "feature_modes",
                   "frontend", "kv_offload", "kv_instances", "node_count", "replicas", "advanced_args", "pd",
                   "ports", "image", "container_profile", "gpu_runtime", "rdma", "container_args", "weights",
                   "router", "mooncake", "unit", "api_key", "extra_env", "placeholders", "config_dir",
                   "unit_dir", "compile_cache_dir", "docker_binary", "resolution_file"]
HOST_KEYS = ["ansible_host", "vllm_fabric_address", "vllm_fabric_interface", "vllm_pd_role", "vllm_node_rank",
             "vllm_gpu_count", "vllm_gpus", "vllm_deployment_gpus", "vllm_rdma_devices", "vllm_ib_hca",
             "vllm_mooncake_role", "vllm_mooncake_device", "vllm_placeholders"]


@settings(max_examples=200, deadline=None, database=None)
@given(st.dictionaries(st.sampled_from(DEPLOYMENT_KEYS), JSON, max_size=3),
       st.dictionaries(st.sampled_from(HOST_KEYS), JSON, max_size=3))
def test_any_value_of_any_key_is_refused_or_renders(deployment, hostvars):
    try:
        files = render_with(deployment, hostvars=hostvars)
    except (RecipeError, ValueError) as exc:
        assert "Traceback" not in str(exc)
        return
    for path, text in files.items():
        if path.endswith(".service"):
            readers.exec_argv(text)
        elif path.endswith(".secret.env"):
            readers.shim_env_file(text)
        elif path.endswith(".env"):
            assert readers.systemd_env_file(text) == readers.docker_env_file(text)


# --------------------------------------------------------------------------------------
# tables: what the writer refuses, and how it shows it
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [
    ("a\nb", "'a\\nb'"),
    ("a\rb", "'a\\rb'"),
    ("a\x00b", "'a\\x00b'"),
    ("\x1b[31m", "'\\x1b[31m'"),
    ("a\u2028b", "'a\\u2028b'"),
    ("x" * 40000, "'xxxx"),
])
def test_check_text_refuses_with_the_key_and_a_visible_value(value, shown):
    with pytest.raises(U.UnsafeValueError) as caught:
        U.check_text("vllm_deployment.extra_env.X", value)
    message = str(caught.value)
    assert message.startswith("vllm_deployment.extra_env.X: got ") and shown in message
    assert len(message) < 600 and "\n" not in message and "\r" not in message


def test_secrets_are_shown_by_fingerprint_only():
    with pytest.raises(U.UnsafeValueError) as caught:
        U.check_text("vllm_deployment.api_key", "sk-VERYSECRET\n", secret=True)
    assert "sk-VERYSECRET" not in str(caught.value)
    assert U.fingerprint("sk-VERYSECRET\n") in str(caught.value)


@pytest.mark.parametrize("path, ok", [
    ("/etc/vllm-fleet", True), ("/opt/v.1/x_y@z+w", True), ("relative", False), ("/a/../b", False),
    ("/a/./b", False), ("/a b", False), ("/a:b", False), ("/a%b", False), ("/a$b", False), ("/ä", False),
])
def test_check_path(path, ok):
    if ok:
        assert U.check_path("k", path) == path
    else:
        with pytest.raises(U.UnsafeValueError):
            U.check_path("k", path)


@pytest.mark.parametrize("rel, inside", [
    ("g/a/vllm-g.service", True), ("plan.json", True), ("../x", False), ("g/../../x", False),
    ("/etc/passwd", False), ("g//x", False), ("", False),
])
def test_vllm_plan_writes_and_prunes_only_inside_its_dest(rel, inside):
    from ansible_collections.vllm_fleet.recipes.plugins.action.vllm_plan import ActionModule
    assert ActionModule._contained("/out", rel) is inside  # pylint: disable=protected-access


@pytest.mark.parametrize("image, ok", [
    ("vllm/vllm-openai:v0.11.0", True), ("vllm/vllm-openai:nightly", True), ("ubuntu", True),
    ("registry.example.com:5000/org/image:tag", True), ("localhost/x", True), ("[fd00::1]:5000/x:1", True),
    ("vllm/vllm-openai@sha256:" + "a" * 64, True), ("a/b:T_A.G-1@sha256:" + "0" * 64, True),
    ("--privileged", False), ("-v", False), ("vllm/vllm-openai:latest --privileged", False),
    ("vllm/OpenAI", False), ("vllm/openai:", False), ("vllm//openai", False), ("vllm/openai:a/b", False),
    ("vllm/openai@sha256:abc", False), ("x\n", False), ("", False), ("a" * 600, False),
])
def test_check_image_follows_dockers_reference_grammar(image, ok):
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._inventory_checks import check_image
    if ok:
        assert check_image("vllm_deployment.image", image) == image
    else:
        with pytest.raises(RecipeError, match=r"^vllm_deployment\.image: "):
            check_image("vllm_deployment.image", image)


# --------------------------------------------------------------------------------------
# issue 33: names, host variables, recipe versions and placeholders
# --------------------------------------------------------------------------------------

LETTERS = st.text(st.characters(categories=["L", "Nd"]), min_size=1, max_size=6)
#: Unicode format characters (Cf): bidi overrides, zero-width joiners and spaces, soft hyphens, tags.
FORMAT_CHARS = st.characters(categories=["Cf"])
WITH_FORMAT_CHAR = st.builds(lambda a, c, b: a + c + b, LETTERS, FORMAT_CHARS,
                             st.text(st.characters(categories=["L"]), max_size=4))


def refused_naming(key: str, build: Callable[[], Any]) -> str:
    with pytest.raises((RecipeError, ValueError)) as caught:
        build()
    message = str(caught.value)
    assert key in message and "Traceback" not in message, message
    return message


@SETTINGS
@given(WITH_FORMAT_CHAR)
@example("a\u202egnp.exe")
@example("no\u200dde")
def test_any_format_character_in_a_host_name_is_refused(name):
    message = refused_naming("inventory host name", lambda: plan_with(host=name))
    assert "format character" in message or "control character" in message  # U+FEFF: a BOM too


@SETTINGS
@given(WITH_FORMAT_CHAR)
def test_any_format_character_in_a_served_model_name_is_refused(name):
    message = refused_naming("vllm_deployment.advanced_args[1]",
                             lambda: plan_with({"advanced_args": ["--served-model-name", name]}))
    assert "format character" in message or "control character" in message


@SETTINGS
@given(WITH_FORMAT_CHAR)
def test_any_format_character_in_a_group_or_recipe_name_is_refused(name):
    refused_naming("vllm_deployment.group", lambda: plan_with({"group": name}))
    refused_naming("vllm_deployment.recipe", lambda: plan_with({"recipe": "zai-org/" + name}))


@SETTINGS
@given(st.builds(lambda a, c, b: a + c + b, st.sampled_from(["10.40.0.1", "", "10.40."]),
                 st.characters(categories=["Cc"]), st.sampled_from(["", "1", "0.1", " "])))
@example("10.40.0.1\n")
@example("10.40.0.1\x1b[31m")
def test_any_control_character_in_ansible_host_is_refused(value):
    message = refused_naming("hostvars['a'].ansible_host", lambda: plan_with(hostvars={"ansible_host": value}))
    assert "control character" in message


VERSIONS = st.sampled_from(["0.10", "0.10.1", "0.11.0rc1", "0.12.0.post1", "1.0.0.dev3", "nightly", "0.29.0"])


@SETTINGS
@given(VERSIONS, st.text(min_size=1, max_size=12).filter(lambda t: not t[0].isdigit() and t[0] not in ".abrcdpostv"))
@example("0.10", "; rm -rf /")
def test_a_version_with_anything_after_it_is_refused_by_key(version, tail):
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._schema import validate_recipe
    recipe = {"model": {"model_id": "o/m", "min_vllm_version": version + tail}, "variants": {"default": {}}}
    with pytest.raises(RecipeError) as caught:
        validate_recipe(recipe, "models/o/m.yaml")
    assert str(caught.value).startswith("models/o/m.yaml: model.min_vllm_version: ")


@SETTINGS
@given(st.from_regex(r"\A[A-Z][A-Z0-9_]{0,12}\Z"))
@example("HEAD_IPP")
def test_a_placeholder_the_plan_does_not_use_is_refused(name):
    refused_naming(f"vllm_deployment[g].placeholders.{name}", lambda: plan_with({"placeholders": {name: "x"}}))
