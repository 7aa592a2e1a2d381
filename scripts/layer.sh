#!/usr/bin/env bash
# Builds the Lambda layer that carries the pinned DuckDB extensions (`make layer`).
#
# Usage: scripts/layer.sh [EXTENSION_DIR] [OUT_DIR]
#   EXTENSION_DIR  what `make extensions` filled (default: $DUCKDB_EXTENSION_DIR or .extensions)
#   OUT_DIR        default .local/lambda
#
# Lambda unpacks a layer under /opt, so the layer holds duckdb/extensions/v1.5.4/linux_amd64/*.
# and the functions set DUCKDB_EXTENSION_DIR=/opt/duckdb/extensions (template.yaml). Writes:
#   OUT_DIR/layer/duckdb/extensions/...         the tree template.yaml's ContentUri points at
#   OUT_DIR/duckdb-extensions-layer.zip         the same tree zipped (sizes, manual publishing)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-${DUCKDB_EXTENSION_DIR:-$root/.extensions}}
out=${2:-$root/.local/lambda}
version=v1.5.4
platform=linux_amd64
required=(ducklake icu postgres_scanner httpfs aws)

from=$src/$version/$platform
for name in "${required[@]}"; do
  if [[ ! -f $from/$name.duckdb_extension ]]; then
    echo "layer.sh: $from/$name.duckdb_extension is missing; run \`make extensions\`" >&2
    exit 1
  fi
done

tree=$out/layer
rm -rf "$tree" "$out/duckdb-extensions-layer.zip"
mkdir -p "$tree/duckdb/extensions/$version/$platform"
for name in "${required[@]}"; do
  cp "$from/$name.duckdb_extension" "$tree/duckdb/extensions/$version/$platform/"
done
# Only the extension binaries: no stamp files. Fixed mtimes keep the zip reproducible.
find "$tree" -exec touch -h -d '2020-01-01T00:00:00Z' {} +
(cd "$tree" && TZ=UTC zip -q -r -X -9 "$out/duckdb-extensions-layer.zip" duckdb)
echo "layer: $out/duckdb-extensions-layer.zip ($(du -b "$out/duckdb-extensions-layer.zip" | cut -f1) bytes zipped, $(du -sb "$tree" | cut -f1) bytes unzipped)"
