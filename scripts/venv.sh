#!/usr/bin/env bash
# Creates the Python virtualenv that the tests use for moto (S3 + DynamoDB server).
#
# Usage: scripts/venv.sh            (from anywhere; the venv lands in $DQ_VENV or <repo>/.venv)
#
# Idempotent: a stamp file inside the venv records the pinned requirement; when it matches and
# moto_server is present the script does nothing. Bump MOTO_REQUIREMENT to upgrade: the stamp no
# longer matches and pip installs the new pin into the same venv.
#
# Environment:
#   DQ_VENV  venv directory (default: .venv at the repository root; a relative path is taken
#            relative to the repository root, as testkit does)
#   PYTHON   interpreter used to create the venv (default: python3)
set -euo pipefail

# The only package installed. 5.2.5 was the newest 5.x on PyPI when pinned (`pip index versions moto`).
MOTO_REQUIREMENT='moto[server]==5.2.5'

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${DQ_VENV:-.venv}"
case "$venv" in
    /*) ;;
    *) venv="$repo_root/$venv" ;;
esac
python="${PYTHON:-python3}"
stamp="$venv/.dq-venv-stamp"

if [[ -x "$venv/bin/moto_server" && -f "$stamp" && "$(cat "$stamp")" == "$MOTO_REQUIREMENT" ]]; then
    echo "venv.sh: $venv already has $MOTO_REQUIREMENT"
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
echo "venv.sh: installing $MOTO_REQUIREMENT into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$MOTO_REQUIREMENT"

if [[ ! -x "$venv/bin/moto_server" ]]; then
    echo "venv.sh: $MOTO_REQUIREMENT installed but $venv/bin/moto_server is missing" >&2
    exit 1
fi
printf '%s' "$MOTO_REQUIREMENT" >"$stamp"
echo "venv.sh: done"
