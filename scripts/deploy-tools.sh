#!/usr/bin/env bash
# Installs the deploy tooling into the project venv: aws-sam-cli (`sam validate --lint`, `sam build`,
# `sam deploy`) and cargo-lambda (`cargo lambda build`, and the Lambda Runtime API emulator that
# tests/invoke drives). Every package, transitive ones included, is pinned with its SHA-256 in
# scripts/deploy-tools.lock and installed with `pip --require-hashes`.
#
# Usage: scripts/deploy-tools.sh     (runs scripts/venv.sh first: the lock shares moto's venv)
#
# Idempotent: a stamp in the venv records the lock's SHA-256; when it matches and `sam` and
# `cargo-lambda` are present, nothing is done.
#
# Environment:
#   DQ_VENV  venv directory (default: .venv at the repository root), as in scripts/venv.sh
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lock="$repo_root/scripts/deploy-tools.lock"
venv="${DQ_VENV:-.venv}"
case "$venv" in
    /*) ;;
    *) venv="$repo_root/$venv" ;;
esac
stamp="$venv/.dq-deploy-tools-stamp"
want="$(sha256sum "$lock" | cut -d' ' -f1)"

# The lock pins moto too (so pip resolves one consistent venv); it must be venv.sh's pin.
moto_pin="$(sed -n "s/^MOTO_REQUIREMENT='\\(.*\\)'$/\\1/p" "$repo_root/scripts/venv.sh")"
if ! grep -qF "$moto_pin \\" "$lock"; then
    echo "deploy-tools.sh: scripts/venv.sh pins $moto_pin but $(basename "$lock") does not; regenerate the lock" >&2
    exit 1
fi

"$repo_root/scripts/venv.sh"

if [[ -x "$venv/bin/sam" && -x "$venv/bin/cargo-lambda" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "deploy-tools.sh: $venv already has aws-sam-cli and cargo-lambda from $(basename "$lock")"
    exit 0
fi

rm -f "$stamp"
echo "deploy-tools.sh: installing $(grep -cE '^[A-Za-z0-9].*==' "$lock") hash-pinned packages (aws-sam-cli, cargo-lambda) into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --require-hashes -r "$lock"

for tool in sam cargo-lambda moto_server; do
    if [[ ! -x "$venv/bin/$tool" ]]; then
        echo "deploy-tools.sh: $venv/bin/$tool is missing after the install" >&2
        exit 1
    fi
done
printf '%s' "$want" >"$stamp"
echo "deploy-tools.sh: $("$venv/bin/sam" --version), $("$venv/bin/cargo-lambda" lambda --version)"
