#!/usr/bin/env bash
# `make lambda`: release build of every function with cargo-lambda, one bootstrap.zip per function,
# then the size check (scripts/lambda-size.py) against the layer from `make layer`.
#
# Usage: scripts/lambda.sh
#
# Environment:
#   DQ_VENV            venv with cargo-lambda (scripts/deploy-tools.sh; default .venv)
#   LAMBDA_DIR         output directory (default .local/lambda; zips land in functions/<bin>/)
#   LAMBDA_BINS        functions to build (default "materializer graphql fetch"; the graphql zip
#                      is the code of all three GraphQL functions, one per dialect)
#   LAMBDA_TARGET_DIR  cargo target directory of the release build (default
#                      /var/tmp/dq-target-lambda: separate from the debug CARGO_TARGET_DIR so the
#                      two builds never wait on each other's lock)
#
# Build choices:
# - x86_64-unknown-linux-gnu with the host toolchain (`--compiler cargo`): the bundled DuckDB C++
#   build needs a C++ compiler, and the host's is what `make test` already uses. The size check
#   verifies the binary needs no glibc symbol newer than Amazon Linux 2023's 2.34.
# - `--disable-optimizations`: cargo-lambda would otherwise force panic=abort, thin LTO and one
#   codegen unit on a workspace without a [profile.release]; panic=abort changes behaviour (a panic
#   in a handler kills the runtime instead of failing one invocation). Only symbols are stripped.
# - `--workspace --exclude dq-bench`: the whole workspace's feature set (never a `-p` subset) minus
#   the benchmark CLI, the one member whose normal dependencies enable `dq-auth/dev` (the
#   development token signer) and the `testing` features of dq-lake/dq-materialize; with it they
#   would be compiled into the Lambda binaries.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv=${DQ_VENV:-.venv}
case "$venv" in /*) ;; *) venv=$root/$venv ;; esac
out=${LAMBDA_DIR:-$root/.local/lambda}
target_dir=${LAMBDA_TARGET_DIR:-/var/tmp/dq-target-lambda}
read -r -a bins <<<"${LAMBDA_BINS:-materializer graphql fetch}"

if [[ ! -x $venv/bin/cargo-lambda ]]; then
  echo "lambda.sh: $venv/bin/cargo-lambda is missing; run \`make deploy-tools\`" >&2
  exit 1
fi
export PATH="$venv/bin:$PATH"
export CARGO_TARGET_DIR=$target_dir

bin_args=()
for b in "${bins[@]}"; do bin_args+=(--bin "$b"); done
rm -rf "$out/functions"
start=$(date +%s)
(cd "$root" && cargo lambda build --release --compiler cargo --target x86_64-unknown-linux-gnu \
  --disable-optimizations --config 'profile.release.strip="symbols"' \
  --workspace --exclude dq-bench "${bin_args[@]}" --output-format zip --lambda-dir "$out/functions")
echo "lambda: built ${bins[*]} in $(( $(date +%s) - start )) s (target dir $target_dir)"

python3 "$root/scripts/lambda-size.py" --lambda-dir "$out" "${bins[@]}"
