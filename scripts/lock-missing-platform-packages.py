#!/usr/bin/env python3
"""Adds lockfile entries for optional per-platform packages that this machine's npm registry
mirror does not serve (e.g. @napi-rs/lzma-win32-x64-msvc, a dependency of @napi-rs/cli).

npm install leaves them out of package-lock.json when their manifests 404, and npm ci then
refuses the lock as "not in sync". Each stub carries the os/cpu of its napi-rs platform suffix,
so npm ci skips it on every other platform without fetching anything. Re-run after npm install.
"""
import json
import re

PLATFORMS = {
    "android-arm-eabi": (["android"], ["arm"]),
    "android-arm64": (["android"], ["arm64"]),
    "darwin-arm64": (["darwin"], ["arm64"]),
    "darwin-x64": (["darwin"], ["x64"]),
    "darwin-universal": (["darwin"], ["x64", "arm64"]),
    "freebsd-x64": (["freebsd"], ["x64"]),
    "freebsd-arm64": (["freebsd"], ["arm64"]),
    "linux-arm-gnueabihf": (["linux"], ["arm"]),
    "linux-arm-musleabihf": (["linux"], ["arm"]),
    "linux-arm64-gnu": (["linux"], ["arm64"]),
    "linux-arm64-musl": (["linux"], ["arm64"]),
    "linux-ppc64-gnu": (["linux"], ["ppc64"]),
    "linux-riscv64-gnu": (["linux"], ["riscv64"]),
    "linux-s390x-gnu": (["linux"], ["s390x"]),
    "linux-x64-gnu": (["linux"], ["x64"]),
    "linux-x64-musl": (["linux"], ["x64"]),
    "wasm32-wasi": (None, ["wasm32"]),
    "win32-arm64-msvc": (["win32"], ["arm64"]),
    "win32-ia32-msvc": (["win32"], ["ia32"]),
    "win32-x64-msvc": (["win32"], ["x64"]),
}

lock_path = "package-lock.json"
lock = json.load(open(lock_path))
packages = lock["packages"]
added = 0
for path, meta in list(packages.items()):
    for dep, spec in (meta.get("optionalDependencies") or {}).items():
        key = f"node_modules/{dep}"
        if key in packages:
            continue
        suffix = next((s for s in PLATFORMS if dep.endswith("-" + s)), None)
        if suffix is None:
            continue
        os_list, cpu_list = PLATFORMS[suffix]
        entry = {"version": re.sub(r"^[\^~=]", "", spec), "optional": True}
        if meta.get("dev"):
            entry["dev"] = True
        if cpu_list:
            entry["cpu"] = cpu_list
        if os_list:
            entry["os"] = os_list
        packages[key] = entry
        added += 1
lock["packages"] = dict(sorted(packages.items(), key=lambda kv: (kv[0] != "", kv[0])))
json.dump(lock, open(lock_path, "w"), indent=2)
open(lock_path, "a").write("\n")
print(f"added {added} lock entries")
