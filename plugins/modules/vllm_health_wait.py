#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Wait for a process's health URL, failing fast with the process's own words when it crash-loops."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_health_wait
short_description: Wait until a vLLM process answers its health URL, or fail fast when it crash-loops
description:
  - Polls O(url) every O(interval) seconds until it answers HTTP 200, for at most O(timeout) seconds.
    Connection refused and HTTP 503 (a model still loading, a multi-node head waiting for its ranks)
    mean "not yet".
  - Meanwhile it watches the systemd O(units) that serve the URL. When one of them was restarted by
    systemd more than O(max_restarts) times since the wait began, or is in the C(failed) state, the
    wait ends at once instead of at O(timeout); the failure message quotes the unit's own error lines
    from the journal, for example vLLM's refusal of an unknown flag.
  - Read-only. The deploy roles use it as the health gate of every start wave.
version_added: 0.2.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  url:
    description: Health URL of the process (C(/health) of the vLLM API server, vllm-router's C(/health)).
    type: str
    required: true
  units:
    description: systemd units whose crash loop makes waiting pointless (the process's own unit first).
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait for HTTP 200 (the deployment's C(VLLM_ENGINE_READY_TIMEOUT_S)).
    type: int
    default: 1800
  interval:
    description: Seconds between two polls.
    type: int
    default: 5
  max_restarts:
    description:
      - Automatic restarts of a unit tolerated during the wait (a multi-node rank may fail once while
        its group forms). The next one ends the wait.
    type: int
    default: 1
  journal_lines:
    description: Error lines of the journal to quote when the unit crash-loops.
    type: int
    default: 6
  headers:
    description:
      - HTTP headers to send (for example C(Authorization) when the health URL needs one).
      - no_log, so an API key in them never reaches the host's journal.
    type: dict
    default: {}
extends_documentation_fragment:
  - vllm_fleet.recipes.read_only
attributes:
  check_mode:
    support: full
    description: Read-only; it runs in check mode too, so a check run reports a process that is down.
  platform:
    support: full
    platforms: posix
    description: Any host with systemd and journald.
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: needs a running engine and its systemd unit
- name: Wait for the engine, failing fast when vLLM refuses its flags
  vllm_fleet.recipes.vllm_health_wait:
    url: http://10.0.0.5:8000/health
    units: [vllm-glm-r0.service]
    timeout: 3600
"""

RETURN = r"""
elapsed_s:
  description: Seconds until the URL answered 200.
  returned: success
  type: float
  sample: 57.3
restarts:
  description: Automatic restarts per unit during the wait.
  returned: always
  type: dict
  sample: {vllm-glm-r0.service: 0}
engine_errors:
  description: The unit's error lines from the journal (when it crash-looped or the wait timed out).
  returned: failure
  type: list
  elements: str
  sample: ["vllm serve: error: unrecognized arguments: --no-such-flag"]
"""

import re
import time
import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

ERROR_LINE = re.compile(r"(?i)\b(error|exception|refused|invalid|unrecognized|not supported|usage:)")
# Lines that mention errors without being one (vLLM logs its config, routes and env at start).
NOISE_LINE = re.compile(r"(?i)(Route: |non-default args|deprecat)")


def health_status(url: str, headers: dict, timeout: float = 5.0) -> int:
    """HTTP status of ``url``; 0 when nothing answers."""
    try:
        with open_url(url, headers=headers, timeout=timeout, follow_redirects="none") as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ValueError):
        return 0


def unit_state(module: AnsibleModule, unit: str) -> dict[str, str]:
    rc, out, _err = module.run_command(["systemctl", "show", "-p", "NRestarts", "-p", "ActiveState",
                                        "-p", "Result", "--", unit])
    if rc != 0:
        return {}
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def error_lines(module: AnsibleModule, unit: str, since: str, limit: int) -> list[str]:
    """The last ``limit`` error lines the unit wrote since ``since`` (else its last lines)."""
    rc, out, _err = module.run_command(["journalctl", "-u", unit, "--since", since, "--no-pager", "-o", "cat",
                                        "-n", "400"])
    if rc != 0:
        return []
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    errors = [line for line in lines if ERROR_LINE.search(line) and not NOISE_LINE.search(line)]
    return [line[:300] for line in (errors or lines)[-limit:]]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "units": {"type": "list", "elements": "str", "default": []},
            "timeout": {"type": "int", "default": 1800},
            "interval": {"type": "int", "default": 5},
            "max_restarts": {"type": "int", "default": 1},
            "journal_lines": {"type": "int", "default": 6},
            "headers": {"type": "dict", "default": {}, "no_log": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    units: list[str] = params["units"]
    since = time.strftime("%Y-%m-%d %H:%M:%S")
    start = time.monotonic()
    initial = {unit: int(unit_state(module, unit).get("NRestarts") or 0) for unit in units}
    restarts = dict.fromkeys(units, 0)
    status = 0
    while True:
        status = health_status(params["url"], params["headers"])
        if status == 200:
            module.exit_json(changed=False, elapsed_s=round(time.monotonic() - start, 1), restarts=restarts)
        for unit in units:
            state = unit_state(module, unit)
            restarts[unit] = int(state.get("NRestarts") or 0) - initial[unit]
            looping = restarts[unit] > params["max_restarts"]
            if looping or state.get("ActiveState") == "failed":
                why = (f"restarted {restarts[unit]} times in {time.monotonic() - start:.0f} s" if looping
                       else f"failed ({state.get('Result', 'unknown')})")
                errors = error_lines(module, unit, since, params["journal_lines"])
                module.fail_json(msg=f"{unit} {why} before {params['url']} answered; it said: "
                                     + (" | ".join(errors) or "nothing in the journal"),
                                 restarts=restarts, engine_errors=errors)
        if time.monotonic() - start + params["interval"] > params["timeout"]:
            errors = error_lines(module, units[0], since, params["journal_lines"]) if units else []
            module.fail_json(msg=f"{params['url']} did not answer 200 within {params['timeout']} s (last status "
                                 f"{status or 'no answer'})" + ("; the unit said: " + " | ".join(errors) if errors else ""),
                             restarts=restarts, engine_errors=errors)
        time.sleep(params["interval"])


if __name__ == "__main__":
    main()
