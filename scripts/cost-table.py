#!/usr/bin/env python3
"""Cost per 1,000 queries on AWS from measured durations: BENCHMARKS.json (the `make bench` run:
warm and cold p50 per case, PostgreSQL catalog, this 2-core machine) x the query functions'
memory. Prints a Markdown table for docs/deploy.md.

Usage: scripts/cost-table.py [--memory-mb 2048] [--cold-share 0.01] [BENCHMARKS.json]

Prices (us-east-1, x86_64, on-demand, as published by AWS): Lambda $0.0000166667 per GB-second
billed per 1 ms, $0.20 per million requests; HTTP API $1.00 per million requests. The durations are
this machine's; a Lambda of 2048 MB has about 1.2 vCPUs, so treat the figures as an estimate and
re-run with your own `make bench` numbers.
"""

import argparse
import json
import math
import pathlib

LAMBDA_GB_SECOND = 0.0000166667
LAMBDA_REQUEST = 0.20 / 1_000_000
HTTP_API_REQUEST = 1.00 / 1_000_000


def per_thousand(ms: float, memory_mb: int) -> float:
    billed_s = math.ceil(ms) / 1000
    return 1000 * (billed_s * memory_mb / 1024 * LAMBDA_GB_SECOND + LAMBDA_REQUEST + HTTP_API_REQUEST)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmarks", nargs="?", default=str(pathlib.Path(__file__).resolve().parents[1] / "BENCHMARKS.json"))
    ap.add_argument("--memory-mb", type=int, default=2048, help="QueryMemorySize (template default 2048)")
    ap.add_argument("--cold-share", type=float, default=0.01, help="share of requests that meet a new instance")
    args = ap.parse_args()
    bench = json.loads(pathlib.Path(args.benchmarks).read_text())
    print(f"Measured by `make bench` ({bench['machine']}), {bench['catalog']} catalog; "
          f"{args.memory_mb} MB, {args.cold_share:.0%} of requests cold.\n")
    print("| case | warm p50 ms | cold p50 ms | $ per 1k queries (warm) | $ per 1k (mix) |")
    print("|---|---:|---:|---:|---:|")
    for q in bench["queries"]:
        warm, cold = q["dq"]["warm_ms"]["p50"], q["dq"]["cold_ms"]["p50"]
        w = per_thousand(warm, args.memory_mb)
        mix = (1 - args.cold_share) * w + args.cold_share * per_thousand(cold, args.memory_mb)
        print(f"| {q['case']} | {warm:.1f} | {cold:.1f} | {w:.5f} | {mix:.5f} |")


if __name__ == "__main__":
    main()
