#!/usr/bin/env bash
# make demo: seed a fresh local lake with the din simulator, decode it with the materializer until
# caught up (printing its summary), then serve it: FetchService (gRPC + gRPC-web) and the graphql
# binary once per GraphQL dialect, each on its own port (docs/dialects.md), each printing a curl
# with a development token, then the MCP endpoints (docs/cutover.md). Ctrl-C stops them all.
#
# Ports: PORT (dq dialect, 8080), PORT_TELEMETRY (telemetry-api dialect, 8081), PORT_FETCH
# (fetch-api dialect, 8082), PORT_GRPC (FetchService, 8086).
set -euo pipefail

: "${CARGO_TARGET_DIR:?}" "${DEMO_DIR:?}"
BIN="$CARGO_TARGET_DIR/debug"
PORT="${PORT:-8080}"
PORT_TELEMETRY="${PORT_TELEMETRY:-8081}"
PORT_FETCH="${PORT_FETCH:-8082}"
PORT_GRPC="${PORT_GRPC:-8086}"
# The attester of VIN credentials (vinVCLatest); production's by default (the demo fleet has none).
STORAGE_NODE_DEV_LICENSE="${STORAGE_NODE_DEV_LICENSE:-0x49eAf63eD94FEf3d40692862Eee2C8dB416B1a5f}"

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
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

# Waits until the server on port $1 listens (it binds after opening the lake and printing its
# curl); fails when its process $2 exits first.
wait_ready() {
  local port=$1 pid=$2 i
  for ((i = 0; i < 600; i++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "demo: the server for port $port exited" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "demo: nothing listens on 127.0.0.1:$port after 60 s" >&2
  return 1
}

echo "== FetchService: gRPC and gRPC-web on 127.0.0.1:$PORT_GRPC (unauthenticated callers trusted: demo only)"
# The trust setting is accepted only on a loopback listener.
HOST_GRPC=127.0.0.1 PORT_GRPC="$PORT_GRPC" FETCH_GRPC_TRUST_UNAUTHENTICATED=true "$BIN/fetch" &
pids+=($!)

# Token ids are seed-derived: the demo tokens are for the fleet's first vehicle,
# did:erc721:<chain>:<vehicle contract>:<token id>. The telemetry dialect builds that DID from
# tokenId with DIMO_REGISTRY_CHAIN_ID and VEHICLE_NFT_ADDRESS, so it gets the fleet's.
vehicle=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["first_subjects"][0])' "$DEMO_DIR/seed.json")
vehicle="${DQ_DEV_SUBJECT:-$vehicle}"
IFS=: read -r _ _ chain contract token_id <<<"$vehicle"

echo "== GraphQL, dq dialect, on http://localhost:$PORT/query (playground at /)"
PORT="$PORT" GRAPHQL_DIALECT=dq DQ_DEV_AUTH=1 DQ_DEV_SUBJECT="$vehicle" "$BIN/graphql" &
pids+=($!)
wait_ready "$PORT" "${pids[-1]}"

echo "== GraphQL, telemetry-api dialect, on http://localhost:$PORT_TELEMETRY/query (tokenId $token_id = $vehicle)"
PORT="$PORT_TELEMETRY" GRAPHQL_DIALECT=telemetry DIMO_REGISTRY_CHAIN_ID="$chain" \
  VEHICLE_NFT_ADDRESS="$contract" STORAGE_NODE_DEV_LICENSE="$STORAGE_NODE_DEV_LICENSE" \
  DQ_DEV_AUTH=1 DQ_DEV_SUBJECT="$vehicle" "$BIN/graphql" &
pids+=($!)
wait_ready "$PORT_TELEMETRY" "${pids[-1]}"

echo "== GraphQL, fetch-api dialect, on http://localhost:$PORT_FETCH/query"
PORT="$PORT_FETCH" GRAPHQL_DIALECT=fetch DQ_DEV_AUTH=1 DQ_DEV_SUBJECT="$vehicle" "$BIN/graphql" &
pids+=($!)
wait_ready "$PORT_FETCH" "${pids[-1]}"

echo "== serving the demo lake; Ctrl-C stops everything"
echo "   GraphQL dq         http://localhost:$PORT/query  (playground http://localhost:$PORT/)"
echo "   GraphQL telemetry  http://localhost:$PORT_TELEMETRY/query  (playground http://localhost:$PORT_TELEMETRY/)"
echo "   GraphQL fetch      http://localhost:$PORT_FETCH/query  (playground http://localhost:$PORT_FETCH/)"
echo "   FetchService       127.0.0.1:$PORT_GRPC (gRPC and gRPC-web)"
echo "   MCP (AI agents)    http://localhost:$PORT/mcp  http://localhost:$PORT_TELEMETRY/mcp  http://localhost:$PORT_FETCH/mcp"
echo "   MCP client config: {\"mcpServers\": {\"dimo-query\": {\"type\": \"http\", \"url\": \"http://localhost:$PORT/mcp\", \"headers\": {\"Authorization\": \"Bearer <token printed above>\"}}}}"
echo "   MCP tools:  curl -s http://localhost:$PORT/mcp -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}'"
# Until one of them stops; the EXIT trap stops the others.
status=0
wait -n "${pids[@]}" || status=$?
echo "demo: a server exited ($status); stopping the others" >&2
exit "$status"
