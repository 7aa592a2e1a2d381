#!/usr/bin/env python3
"""The crate graph points down: the read side does not link the write side.

Reads `cargo metadata` (the resolved graph of the lock file, offline) and checks, for each rule
below, that the crates a package links (its normal dependencies, transitively, plus its own
dev-dependencies, as `cargo tree -p <package>` lists them) contain none of the forbidden ones.
Exits non-zero with one line per violation and the path that pulls it in.
"""
import json
import subprocess
import sys

# package -> crates it must never link, and why. A function's own dev-dependencies count too (as
# in `cargo tree -p`); a library's tests may write a lake with the materializer, so for the
# libraries only what they link into a function counts.
WITH_DEV = {"dq-fn-graphql", "dq-fn-fetch"}
RULES = {
    "dq-fn-graphql": (
        {"dq-materialize", "dq-lease", "dq-decode", "aws-sdk-dynamodb", "dq-fetch", "tonic",
         "tonic-web", "dq-dinsim", "dq-fleet"},
        "the GraphQL Lambda reads: no write path, no lease, no decoder, no gRPC stack",
    ),
    "dq-fn-fetch": (
        {"dq-materialize", "dq-lease", "dq-decode", "aws-sdk-dynamodb", "dq-graphql",
         "async-graphql", "dq-query", "dq-dinsim", "dq-fleet"},
        "the fetch Lambda reads raw events: no write path, no lease, no decoder, no GraphQL",
    ),
    "dq-query": ({"dq-materialize", "dq-lease", "dq-decode", "aws-sdk-dynamodb"},
                 "read SQL shares table definitions through dq-tables, not the materializer"),
    "dq-rawquery": ({"tonic", "dq-proto", "dq-materialize", "dq-lease", "dq-decode"},
                    "the cloud-event read engine has no transport and no write path"),
    "dq-graphql": ({"tonic", "dq-fetch", "dq-materialize", "dq-lease", "dq-decode"},
                   "GraphQL reads cloud events through dq-rawquery, not FetchService"),
    "dq-tables": ({"dq-materialize", "dq-query", "dq-decode", "dq-lease"},
                  "the shared table definitions sit below both sides"),
}


def host_target() -> str:
    """The host triple: the graph is resolved for the platform the functions are built for
    (Lambda is Linux), which also keeps other platforms' crates out of the download."""
    out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    return next(l.split(": ", 1)[1] for l in out.splitlines() if l.startswith("host: "))


def main() -> int:
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--filter-platform",
         host_target()],
        check=True, capture_output=True, text=True).stdout)
    name = {p["id"]: p["name"] for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    by_name = {}
    for pid, n in name.items():
        if pid in nodes:
            by_name.setdefault(n, []).append(pid)

    def edges(pid, dev):
        for d in nodes[pid]["deps"]:
            kinds = {k["kind"] for k in d["dep_kinds"]}
            if None in kinds or "build" in kinds or (dev and "dev" in kinds):
                yield d["pkg"]

    failures = []
    for package, (forbidden, why) in RULES.items():
        roots = [p for p in by_name.get(package, []) if p in meta["workspace_members"]]
        if not roots:
            failures.append(f"{package}: not a workspace member")
            continue
        root = roots[0]
        parent = {root: None}
        stack = [(d, root) for d in edges(root, dev=package in WITH_DEV)]
        while stack:
            pid, via = stack.pop()
            if pid in parent:
                continue
            parent[pid] = via
            stack.extend((d, pid) for d in edges(pid, dev=False))
        linked = {name[p]: p for p in parent}
        for bad in sorted(forbidden & linked.keys()):
            path, at = [], linked[bad]
            while at is not None:
                path.append(name[at])
                at = parent[at]
            failures.append(f"{package} links {bad} ({' <- '.join(path)}): {why}")
        print(f"ok   {package}: {len(linked)} crates, none of {len(forbidden)} forbidden"
              if not forbidden & linked.keys() else f"FAIL {package}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
