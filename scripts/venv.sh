#!/usr/bin/env bash
# Creates the Python virtualenv that the tests use: moto (S3 + DynamoDB server) and graphql-core
# (scripts/graphql-check.py: the committed SDL and introspection checked by graphql-js's port).
#
# Usage: scripts/venv.sh            (from anywhere; the venv lands in $DQ_VENV or <repo>/.venv)
#
# Idempotent: a stamp file inside the venv records the pinned requirements; when it matches and
# moto_server is present the script does nothing. Bump a pin to upgrade: the stamp no longer
# matches and pip installs the new pins into the same venv.
#
# Environment:
#   DQ_VENV  venv directory (default: .venv at the repository root; a relative path is taken
#            relative to the repository root, as testkit does)
#   PYTHON   interpreter used to create the venv (default: python3)
set -euo pipefail

# 5.2.5 was the newest 5.x on PyPI when pinned (`pip index versions moto`).
MOTO_REQUIREMENT='moto[server]==5.2.5'
# moto[server] depends on graphql-core unpinned; scripts/deploy-tools.lock, installed into the same
# venv, pins 3.3.2 (the newest on PyPI when pinned), so this pin must stay equal to the lock's.
GRAPHQL_CORE_REQUIREMENT='graphql-core==3.3.2'
REQUIREMENTS=("$MOTO_REQUIREMENT" "$GRAPHQL_CORE_REQUIREMENT")

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${DQ_VENV:-.venv}"
case "$venv" in
    /*) ;;
    *) venv="$repo_root/$venv" ;;
esac
python="${PYTHON:-python3}"
stamp="$venv/.dq-venv-stamp"

if [[ -x "$venv/bin/moto_server" && -f "$stamp" && "$(cat "$stamp")" == "${REQUIREMENTS[*]}" ]]; then
    echo "venv.sh: $venv already has ${REQUIREMENTS[*]}"
    exit 0
fi

# A venv whose interpreter no longer runs (e.g. the base python moved) is rebuilt from scratch.
if [[ -d "$venv" ]] && ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    echo "venv.sh: $venv is broken, recreating it"
    rm -rf "$venv"
fi

if [[ ! -x "$venv/bin/python" ]]; then
    echo "venv.sh: creating $venv with $("$python" --version 2>&1)"
    "$python" -m venv "$venv"
fi

rm -f "$stamp"
echo "venv.sh: installing ${REQUIREMENTS[*]} into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "${REQUIREMENTS[@]}"

if [[ ! -x "$venv/bin/moto_server" ]]; then
    echo "venv.sh: $MOTO_REQUIREMENT installed but $venv/bin/moto_server is missing" >&2
    exit 1
fi
printf '%s' "${REQUIREMENTS[*]}" >"$stamp"
echo "venv.sh: done"
