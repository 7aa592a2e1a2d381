#!/usr/bin/env bash
# Provision the DuckDB extensions listed in scripts/extensions.lock into an extension directory laid
# out as DuckDB expects (<dir>/v1.5.4/linux_amd64/<name>.duckdb_extension). pip verifies every
# wheel against the committed SHA-256 (--require-hashes); nothing is downloaded at run time.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-${DUCKDB_EXTENSION_DIR:-$root/.extensions}}
lock=$root/scripts/extensions.lock
duckdb_version=v1.5.4
platform=linux_amd64
python=${PYTHON:-python3}

case "$(uname -m)" in
  x86_64) ;;
  *) echo "extensions.sh: only linux x86_64 wheels are pinned in $lock (this is $(uname -m))" >&2; exit 1 ;;
esac

target=$dest/$duckdb_version/$platform
stamp=$target/.lock.sha256
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "extensions: up to date in $target"
  exit 0
fi

wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
echo "extensions: downloading $(grep -c '^duckdb-extension' "$lock") wheels (hash-checked) ..."
"$python" -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
  --platform manylinux2014_x86_64 --python-version 3.11 -d "$wheels" -r "$lock"

mkdir -p "$target"
"$python" - "$wheels" "$target" "$duckdb_version" <<'PY'
import pathlib, shutil, sys, zipfile
wheels, target, version = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
for whl in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        members = [m for m in z.namelist() if m.endswith(".duckdb_extension") and f"/{version}/" in m]
        if len(members) != 1:
            sys.exit(f"extensions.sh: {whl.name} holds no single {version} extension: {members}")
        out = target / pathlib.PurePosixPath(members[0]).name
        tmp = out.with_suffix(".tmp")
        with z.open(members[0]) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        tmp.replace(out)
        print(f"extensions: {out.name} ({out.stat().st_size // (1 << 20)} MiB)")
PY
echo "$want" >"$stamp"
echo "extensions: installed into $target"
