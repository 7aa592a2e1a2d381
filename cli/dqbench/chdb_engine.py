"""ClickHouse engine of `dq-bench all`: chDB (the ClickHouse engine as a Python library) driven
over a line protocol on stdin/stdout, so that the Rust benchmark runner times ClickHouse on the
same rows, in the same run, as its own paths.

Usage: chdb_engine.py <session dir>

Each request is one JSON line; each answer is one JSON line:
  {"op": "exec", "sql": "..."}                 -> {"ms": [t]}
  {"op": "query", "sql": "...", "repeat": n}   -> {"ms": [t1, ..., tn], "data": [[...], ...]}
On failure: {"error": "..."}. Times are measured here, around the engine call alone, in ms; the
rows are those of the last repetition, in ClickHouse's JSONCompact shape (64-bit integers as
numbers). The first line written is {"ready": true, "open_ms": t}: the time to open the session.
"""

import json
import sys
import time


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: chdb_engine.py <session dir>", file=sys.stderr)
        return 2
    from chdb import session

    started = time.perf_counter()
    sess = session.Session(sys.argv[1])
    sess.query("SET output_format_json_quote_64bit_integers = 0")
    reply({"ready": True, "open_ms": (time.perf_counter() - started) * 1e3})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            reply(handle(sess, req))
        except Exception as e:  # every failure is an answer, never a dead pipe
            reply({"error": f"{type(e).__name__}: {e}"})
    sess.close()
    return 0


def handle(sess, req):
    op = req.get("op")
    if op == "exec":
        t = time.perf_counter()
        sess.query(req["sql"])
        return {"ms": [(time.perf_counter() - t) * 1e3]}
    if op == "query":
        times = []
        result = None
        for _ in range(max(1, int(req.get("repeat", 1)))):
            t = time.perf_counter()
            result = sess.query(req["sql"], "JSONCompact")
            times.append((time.perf_counter() - t) * 1e3)
        raw = result.bytes() if result is not None else b""
        data = json.loads(raw)["data"] if raw else []
        return {"ms": times, "data": data}
    raise ValueError(f"unknown op {op!r}")


def reply(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
