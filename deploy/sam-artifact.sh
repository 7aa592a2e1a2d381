#!/usr/bin/env bash
# One function's code for `sam build` (template.yaml: BuildMethod makefile). SAM runs
# `make build-<LogicalId>` once per function with ARTIFACTS_DIR set; the Makefile maps the logical
# id to its binary and calls this script, which copies that binary's `bootstrap` out of the zip
# scripts/lambda.sh built. So `sam build` ships exactly what `make lambda` builds and measures:
# release profile with unwinding, `--workspace --exclude dq-bench`, symbols stripped.
#
# Usage: deploy/sam-artifact.sh BIN ARTIFACTS_DIR      (BIN: materializer, graphql or fetch)
#
# scripts/lambda.sh (one cargo invocation for all three binaries) runs once per `sam build`: SAM
# empties its build directory (the parent of every ARTIFACTS_DIR) at the start of each build, so a
# marker left there by the first function says the binaries of this build exist. A lock
# serializes the functions of a parallel build.
#
# Environment: LAMBDA_DIR (default .local/lambda), as in scripts/lambda.sh.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-}
artifacts=${2:-}
case $bin in
  materializer | graphql | fetch) ;;
  *)
    echo "sam-artifact.sh: unknown binary '$bin' (materializer, graphql or fetch)" >&2
    exit 2
    ;;
esac
if [[ -z $artifacts ]]; then
  echo "sam-artifact.sh: ARTIFACTS_DIR is empty; \`sam build\` sets it (run \`make sam-build\`)" >&2
  exit 2
fi
out=${LAMBDA_DIR:-$root/.local/lambda}
marker=$(dirname "$artifacts")/.dq-lambda-built

mkdir -p "$out" "$artifacts"
exec 9>"$out/.sam-build.lock"
flock 9
if [[ ! -f $marker ]]; then
  LAMBDA_BINS="materializer graphql fetch" "$root/scripts/lambda.sh"
  echo "$out" >"$marker"
fi
zip=$out/functions/$bin/bootstrap.zip
if [[ ! -f $zip ]]; then
  echo "sam-artifact.sh: $zip is missing after scripts/lambda.sh" >&2
  exit 1
fi
rm -f "$artifacts/bootstrap"
unzip -q "$zip" bootstrap -d "$artifacts"
chmod 0755 "$artifacts/bootstrap"
echo "sam-artifact.sh: $bin -> $artifacts/bootstrap"
