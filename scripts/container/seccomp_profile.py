"""Write the container runtime's default seccomp profile with the evaluator's sandbox allowed in.

Usage: python3 seccomp_profile.py DEFAULT_PROFILE OUT

The sandbox (evaluator/sandbox/, docs/sandbox.md) makes user, mount, PID, network, IPC and UTS
namespaces and names its UTS namespace. Podman's default profile (containers-common's
seccomp.json) already allows unshare, clone, mount, umount2, pivot_root and mount_setattr, but
allows sethostname and setdomainname only to a container that holds CAP_SYS_ADMIN, which the
worker must not hold. Inside a user namespace of its own the sandbox has CAP_SYS_ADMIN there and
nowhere else, so allowing these two calls unconditionally gives the container itself nothing
(outside such a namespace the kernel still refuses them without the capability).
Everything else in the default profile stays as it is.
"""

from __future__ import annotations

import json
import sys

SANDBOX_CALLS = ("sethostname", "setdomainname")
# Calls the sandbox makes that the default profile must already allow unconditionally.
ALREADY_NEEDED = ("unshare", "clone", "mount", "umount2", "pivot_root", "mount_setattr", "prctl")


def unconditionally_allowed(profile: dict) -> set[str]:
    names: set[str] = set()
    for rule in profile.get("syscalls", []):
        conditional = rule.get("includes") or rule.get("excludes") or rule.get("args")
        if rule.get("action") == "SCMP_ACT_ALLOW" and not conditional:
            names.update(rule.get("names", []))
    return names


def with_sandbox_allowed(profile: dict) -> dict:
    if profile.get("defaultAction") == "SCMP_ACT_ALLOW":
        return profile
    missing = [name for name in ALREADY_NEEDED if name not in unconditionally_allowed(profile)]
    if missing:
        raise SystemExit(f"this default seccomp profile does not allow {', '.join(missing)}: the "
                         "sandbox cannot work under it plus two calls; start from podman's default "
                         "(/usr/share/containers/seccomp.json) or write one that allows them")
    # The calls leave every rule that names them (a later rule does not override an earlier
    # one for the same call), then get one rule of their own.
    rules = []
    for rule in profile["syscalls"]:
        names = [name for name in rule.get("names", []) if name not in SANDBOX_CALLS]
        if names:
            rules.append({**rule, "names": names})
    rules.append({"names": list(SANDBOX_CALLS), "action": "SCMP_ACT_ALLOW", "args": [],
                  "comment": "PKB sandbox: names its own UTS namespace"})
    return {**profile, "syscalls": rules}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        raise SystemExit("usage: seccomp_profile.py DEFAULT_PROFILE OUT")
    with open(argv[0]) as f:
        profile = json.load(f)
    with open(argv[1], "w") as f:
        json.dump(with_sandbox_allowed(profile), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
