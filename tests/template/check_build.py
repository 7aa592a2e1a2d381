#!/usr/bin/env python3
"""`sam build` and `make lambda` must build the same binaries (`make validate`).

1. Every function of template.yaml uses BuildMethod makefile (no cargo-lambda builder of SAM's
   own, which forces panic=abort and builds dq-bench's dev/testing features in).
2. `make build-<LogicalId>` exists for each function (make --dry-run resolves it) and calls
   deploy/sam-artifact.sh with the binary the function runs (its environment says which).
3. deploy/sam-artifact.sh builds only through scripts/lambda.sh. A real `sam build` of the
   template (SAM, make, deploy/sam-artifact.sh, scripts/lambda.sh and its size check; only the
   compiler is stood in, a release build of DuckDB taking ~40 minutes) compiles once for all six
   functions with scripts/lambda.sh's arguments and gives each function its binary.
4. scripts/lambda.sh keeps the release profile with unwinding (`--disable-optimizations`, no
   panic=abort in Cargo.toml), the whole workspace minus dq-bench, and no `-p` subset.
5. samconfig.toml builds in the checkout, uncached, in every environment.

Run with the project venv: .venv/bin/python tests/template/check_build.py [TEMPLATE]
"""

import os
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from samcli.yamlhelper import yaml_parse  # noqa: E402

FAILURES = []
CHECKED = []


def check(ok, what):
    CHECKED.append(what)
    if not ok:
        FAILURES.append(what)
    return ok


def binary_of(env):
    """The binary a function runs, from the settings only that binary reads."""
    if "GRAPHQL_DIALECT" in env:
        return "graphql"
    if "MATERIALIZER_LEASE_TABLE" in env:
        return "materializer"
    if "FETCH_GRPC_REQUIRE_JWT" in env:
        return "fetch"
    return None


def code(text):
    """Shell text without comment lines."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def make(*args):
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True)


def check_functions(template):
    functions = {
        name: res for name, res in template["Resources"].items() if res["Type"] == "AWS::Serverless::Function"
    }
    check(len(functions) >= 6, f"the template has its six functions (got {sorted(functions)})")
    expected = {}
    for name, res in functions.items():
        meta = res.get("Metadata", {})
        check(meta.get("BuildMethod") == "makefile", f"{name}: BuildMethod makefile")
        check("BuildProperties" not in meta, f"{name}: no cargo-lambda BuildProperties left")
        binary = binary_of(res.get("Properties", {}).get("Environment", {}).get("Variables", {}))
        if not check(binary, f"{name}: its binary is known from its environment"):
            continue
        expected[name] = binary
        dry = make("--dry-run", f"build-{name}", "ARTIFACTS_DIR=/nonexistent/build/" + name)
        if check(dry.returncode == 0, f"make build-{name} exists ({dry.stderr.strip()[:200]})"):
            check(
                re.search(rf"deploy/sam-artifact\.sh {binary} \"/nonexistent/build/{name}\"", dry.stdout),
                f"make build-{name} copies the {binary} binary through deploy/sam-artifact.sh",
            )
    return expected


def check_artifact_script():
    text = code((ROOT / "deploy/sam-artifact.sh").read_text())
    check(re.search(r'"\$root/scripts/lambda\.sh"', text), "deploy/sam-artifact.sh builds with scripts/lambda.sh")
    check('LAMBDA_BINS="materializer graphql fetch"' in text,
          "deploy/sam-artifact.sh builds the three binaries in one scripts/lambda.sh run")
    check(not re.search(r"\bcargo\b", text), "deploy/sam-artifact.sh runs no cargo of its own")


# Stands in for the compiler only: a release build of DuckDB takes ~40 minutes. It records the
# arguments scripts/lambda.sh gave it and writes a runnable bootstrap per --bin where
# cargo-lambda would: /bin/true (it passes scripts/lambda-size.py's glibc check) with the binary's
# name appended, so each artifact shows which binary it is.
STAND_IN_CARGO_LAMBDA = """#!/usr/bin/env bash
set -euo pipefail
printf '%s\\n' "$*" >>"$DQ_STAND_IN_LOG"
dir=; bins=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --lambda-dir) dir=$2; shift 2 ;;
    --bin) bins+=("$2"); shift 2 ;;
    *) shift ;;
  esac
done
for b in "${bins[@]}"; do
  mkdir -p "$dir/$b/stage" && cp /bin/true "$dir/$b/stage/bootstrap"
  printf '%s' "$b" >>"$dir/$b/stage/bootstrap"
  (cd "$dir/$b/stage" && zip -q ../bootstrap.zip bootstrap) && rm -r "$dir/$b/stage"
done
"""


def check_sam_build(path, expected):
    """A real `sam build` (SAM, make, deploy/sam-artifact.sh, scripts/lambda.sh, the size check)
    with the compiler stood in: one cargo invocation for every function, with scripts/lambda.sh's
    arguments, and each function's artifact is its binary's bootstrap."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        venv, lambda_dir, log = tmp / "venv", tmp / "lambda", tmp / "cargo-lambda.log"
        (venv / "bin").mkdir(parents=True)
        stand_in = venv / "bin" / "cargo-lambda"
        stand_in.write_text(STAND_IN_CARGO_LAMBDA)
        stand_in.chmod(0o755)
        # A minimal layer: SAM packages the directory, the size check reads the zip.
        layer = lambda_dir / "layer" / "duckdb"
        layer.mkdir(parents=True)
        (layer / "README").write_text("stand-in layer\n")
        with zipfile.ZipFile(lambda_dir / "duckdb-extensions-layer.zip", "w") as z:
            z.write(layer / "README", "duckdb/README")
        text = path.read_text()
        check(text.count("ContentUri: .local/lambda/layer/") == 1, "the layer is .local/lambda/layer/ (make layer's tree)")
        template = tmp / "template.yaml"
        template.write_text(text.replace("ContentUri: .local/lambda/layer/", f"ContentUri: {lambda_dir}/layer/"))
        env = dict(os.environ, DQ_VENV=str(venv), LAMBDA_DIR=str(lambda_dir), DQ_STAND_IN_LOG=str(log),
                   SAM_CLI_TELEMETRY="0", AWS_DEFAULT_REGION="us-east-1")
        sam = Path(sys.executable).with_name("sam")
        run = subprocess.run(
            [str(sam), "build", "--template", str(template), "--base-dir", str(ROOT), "--build-dir", str(tmp / "build"),
             "--build-in-source", "--parallel"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
        if not check(run.returncode == 0, f"sam build succeeds ({(run.stdout + run.stderr).strip()[-600:]})"):
            return
        calls = log.read_text().splitlines() if log.is_file() else []
        check(len(calls) == 1, f"sam build compiles once for all functions (got {len(calls)} cargo-lambda runs)")
        if calls:
            args = calls[0].split()
            check(args[:2] == ["lambda", "build"], "the one compile is `cargo lambda build`")
            bins = sorted(b for a, b in zip(args, args[1:]) if a == "--bin")
            check(bins == sorted(set(expected.values())), f"it builds exactly the template's binaries (got {bins})")
            for flag in ("--release", "--disable-optimizations", "--workspace"):
                check(flag in args, f"sam build compiles with {flag} (as make lambda)")
            check(" --exclude dq-bench " in f" {calls[0]} ", "sam build leaves dq-bench out (as make lambda)")
        true = Path("/bin/true").read_bytes()
        for name, binary in sorted(expected.items()):
            out = tmp / "build" / name / "bootstrap"
            check(out.is_file() and out.read_bytes() == true + binary.encode() and out.stat().st_mode & 0o111,
                  f"sam build's {name} artifact is the {binary} bootstrap scripts/lambda.sh built")


def check_lambda_script():
    # One logical line per command: join the backslash continuations.
    text = code((ROOT / "scripts/lambda.sh").read_text()).replace("\\\n", " ")
    build = re.search(r"cargo lambda build([^\n]*)", text)
    if not check(build, "scripts/lambda.sh runs `cargo lambda build`"):
        return
    args = build.group(1)
    check("--release" in args, "scripts/lambda.sh builds the release profile")
    check("--disable-optimizations" in args,
          "scripts/lambda.sh passes --disable-optimizations (cargo-lambda would force panic=abort)")
    check("--workspace" in args and re.search(r"--exclude dq-bench\b", args),
          "scripts/lambda.sh builds the workspace minus dq-bench (its dev/testing features stay out)")
    check(not re.search(r"(^|\s)(-p|--package)\s", args), "scripts/lambda.sh builds no -p subset")
    check("panic" not in args, "scripts/lambda.sh sets no panic strategy")
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    release = cargo.get("profile", {}).get("release", {})
    check(release.get("panic", "unwind") == "unwind", "the release profile unwinds (the GraphQL panic catch needs it)")


def check_samconfig():
    """Every environment builds in the checkout (the Makefile refuses a copy) and from scratch."""
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    envs = [e for e in config if e != "version"]
    for env in envs:
        build = config[env].get("build", {}).get("parameters", {})
        check(build.get("build_in_source") is True, f"samconfig {env}: sam build runs in the checkout (build_in_source)")
        check(build.get("cached") is False, f"samconfig {env}: sam build never reuses a cached artifact")
        check("beta_features" not in build, f"samconfig {env}: no beta build method needed")


def main():
    # An optional path checks another copy of the template (e.g. an older one).
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "template.yaml"
    template = yaml_parse(path.read_text())
    expected = check_functions(template)
    check_artifact_script()
    check_sam_build(path, expected)
    check_lambda_script()
    check_samconfig()
    if FAILURES:
        for f in FAILURES:
            print(f"build check failed: {f}", file=sys.stderr)
        print(f"{len(FAILURES)} of {len(CHECKED)} build checks failed", file=sys.stderr)
        sys.exit(1)
    print(f"sam build = make lambda: all {len(CHECKED)} build checks passed")


if __name__ == "__main__":
    main()
