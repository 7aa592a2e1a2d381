#!/usr/bin/env bash
# make demo: seed a fresh local lake with the din simulator, decode it with the materializer until
# caught up (printing its summary), then serve it: FetchService (gRPC + gRPC-web) in the
# background and GraphQL in the foreground with a development token. Ctrl-C stops both.
set -euo pipefail

: "${CARGO_TARGET_DIR:?}" "${DEMO_DIR:?}"
BIN="$CARGO_TARGET_DIR/debug"
PORT="${PORT:-8080}"
PORT_GRPC="${PORT_GRPC:-8086}"

export DUCKLAKE_CATALOG_DSN="ducklake:$DEMO_DIR/catalog.ducklake"
export DUCKLAKE_DATA_PATH="$DEMO_DIR/data"
export BLOB_BUCKET="$DEMO_DIR/blobs"
export RUST_LOG="${RUST_LOG:-warn}"

rm -rf "$DEMO_DIR"
echo "== din simulator: ${DEMO_VEHICLES:-12} vehicles × ${DEMO_DAYS:-2} days into $DEMO_DIR"
mkdir -p "$DEMO_DIR"
"$BIN/dqctl" seed --catalog "$DUCKLAKE_CATALOG_DSN" --data-path "$DUCKLAKE_DATA_PATH" \
  --blob-dir "$BLOB_BUCKET" --threshold 1536 \
  --vehicles "${DEMO_VEHICLES:-12}" --days "${DEMO_DAYS:-2}" --seed 7 | tee "$DEMO_DIR/seed.json"

echo "== materializer: decoding until caught up"
MATERIALIZER_EMF=false "$BIN/materializer" --once

# A file catalog admits one writer or several read-only readers: the servers attach read-only.
export DUCKLAKE_READ_ONLY=true
echo "== FetchService: gRPC and gRPC-web on 127.0.0.1:$PORT_GRPC (unauthenticated callers trusted: demo only)"
PORT_GRPC="$PORT_GRPC" FETCH_GRPC_TRUST_UNAUTHENTICATED=true "$BIN/fetch" &
FETCH_PID=$!
trap 'kill $FETCH_PID 2>/dev/null || true' EXIT

echo "== GraphQL on http://localhost:$PORT/query (playground at /), Ctrl-C to stop"
# Token ids are seed-derived: the demo token is for the fleet's first vehicle.
vehicle=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["first_subjects"][0])' "$DEMO_DIR/seed.json")
PORT="$PORT" DQ_DEV_AUTH=1 DQ_DEV_SUBJECT="${DQ_DEV_SUBJECT:-$vehicle}" "$BIN/graphql"
