#!/usr/bin/env python3
"""Writes the gRPC-web request bodies of events/fetch-*.json (the one way to regenerate them).

Each sample's `body` is base64 of one gRPC-web message frame (flag 0, 4-byte big-endian length,
then the protobuf message of shared/proto/proto/fetch-api.proto, encoded here by field number).
The requests name the demo fleet (`dqctl seed --vehicles 12 --days 2 --seed 7 --start
DEMO_START`, as tests/invoke/invoke.py seeds it): every value below is one the demo lake holds, so
`make invoke-test` finds data for each, and shared/fetch/tests/it/lambda.rs seeds the same
subjects and ids to run the samples through the Lambda adapter.

    python3 tests/invoke/grpc_web_events.py          # rewrite the bodies
    python3 tests/invoke/grpc_web_events.py --check  # exit 1 when a committed body differs
"""

import argparse
import base64
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The demo fleet's first two vehicles (a Tesla API vehicle, whose payloads are both dimo.status
# and dimo.fingerprint, and a default-oracle one) and the first vehicle's first raw event, whose
# payload is inline (under the seed's 1536-byte threshold), so its key is lake://<subject>/<id>.
VEHICLE = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:135114"
SECOND_VEHICLE = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:135115"
LATEST_TYPE = "dimo.fingerprint"
INDEXED_ID = "3MqkqzrA01ljZTLUFSf8p03j9xF"
INDEXED_KEY = f"lake://{VEHICLE}/{INDEXED_ID}"


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value) -> bytes:
    """One field: an int as a varint (wire type 0), bytes/str/a nested message as wire type 2."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def string_value(s: str) -> bytes:
    """google.protobuf.StringValue {value = 1}."""
    return field(1, s)


def search_options(subject: str, event_type: str = None) -> bytes:
    """grpc.SearchOptions: type = 4, subject = 6 (StringValue wrappers)."""
    out = field(4, string_value(event_type)) if event_type else b""
    return out + field(6, string_value(subject))


# File name -> request message (grpc.<Method>Request).
REQUESTS = {
    # ListCloudEventsRequest {options = 1, limit = 2}: the first vehicle's newest three events.
    "fetch-list-cloud-events.json": field(1, search_options(VEHICLE)) + field(2, 3),
    # GetLatestCloudEventRequest {options = 1}: its newest event of one type.
    "fetch-get-latest-cloud-event.json": field(1, search_options(VEHICLE, LATEST_TYPE)),
    # GetLatestIndexRequest {options = 1}: the second vehicle's newest index.
    "fetch-get-latest-index.json": field(1, search_options(SECOND_VEHICLE)),
    # ListCloudEventsFromKeysRequest {indexes = 1}: CloudEventIndex {header = 1 {id = 1,
    # subject = 5}, data = 2 {key = 1}}, an index the demo lake holds.
    "fetch-list-cloud-events-from-index.json": field(
        1, field(1, field(1, INDEXED_ID) + field(5, VEHICLE)) + field(2, field(1, INDEXED_KEY))
    ),
}


def body(message: bytes) -> str:
    return base64.b64encode(b"\x00" + len(message).to_bytes(4, "big") + message).decode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    args = ap.parse_args()
    stale = []
    for name, message in REQUESTS.items():
        path = ROOT / "events" / name
        text = path.read_text()
        want = body(message)
        if json.loads(text)["body"] == want:
            continue
        stale.append(name)
        if not args.check:
            # Only the body value changes: the rest of the file keeps its layout.
            new, n = re.subn(r'("body":\s*")[^"]*(")', lambda m: m.group(1) + want + m.group(2), text)
            if n != 1:
                raise SystemExit(f"{path}: expected one body, found {n}")
            path.write_text(new)
    if stale:
        print(("stale: " if args.check else "rewrote: ") + ", ".join(stale))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
