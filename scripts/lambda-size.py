#!/usr/bin/env python3
"""Size check of the Lambda artifacts (`make lambda-size`, also run by `make lambda`).

For every function zip (LAMBDA_DIR/functions/<bin>/bootstrap.zip) and the DuckDB extension layer
(LAMBDA_DIR/duckdb-extensions-layer.zip from `make layer`) it reports the zipped and unzipped sizes
and fails when a function plus the layer would exceed Lambda's 250 MB unzipped limit
(262,144,000 bytes = 250 MiB, function code and all its layers together). It also fails when a function
binary needs a glibc symbol newer than provided.al2023's glibc 2.34, or a libstdc++ symbol newer
than its GCC 11 libstdc++ (GLIBCXX_3.4.29; the bundled DuckDB links libstdc++ dynamically).

Writes LAMBDA_DIR/sizes.json with the numbers printed. Exit status 1 on any violation or missing
artifact.
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import zipfile

LIMIT = 262_144_000  # Lambda: 250 MB unzipped, function + layers
AL2023_GLIBC = (2, 34)
AL2023_GLIBCXX = (3, 4, 29)
MiB = 1 << 20  # Lambda's "250 MB" is 250 MiB


def unzipped(path: pathlib.Path) -> int:
    with zipfile.ZipFile(path) as z:
        return sum(i.file_size for i in z.infolist())


def max_versions(zip_path: pathlib.Path):
    """The newest GLIBC_ and GLIBCXX_ symbol versions the function binary needs."""
    with zipfile.ZipFile(zip_path) as z, tempfile.TemporaryDirectory() as tmp:
        binary = z.extract("bootstrap", tmp)
        out = subprocess.run(
            ["objdump", "-T", binary], check=True, capture_output=True, text=True
        ).stdout

    def newest(prefix):
        found = {tuple(int(p) for p in m.strip(".").split(".")) for m in re.findall(prefix + r"_([0-9.]+)", out)}
        return max(found) if found else None

    return newest(r"\bGLIBC"), newest(r"\bGLIBCXX")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lambda-dir", default=".local/lambda")
    ap.add_argument("bins", nargs="*", default=["materializer", "graphql", "fetch"])
    args = ap.parse_args()
    base = pathlib.Path(args.lambda_dir)
    problems = []

    layer_zip = base / "duckdb-extensions-layer.zip"
    if not layer_zip.is_file():
        print(f"lambda-size: {layer_zip} is missing; run `make layer`", file=sys.stderr)
        return 1
    layer = {"zip_bytes": layer_zip.stat().st_size, "unzipped_bytes": unzipped(layer_zip)}

    report = {"limit_bytes": LIMIT, "layer": layer, "functions": {}}
    print(f"{'artifact':<28}{'zip MiB':>10}{'unzipped MiB':>14}{'+ layer MiB':>13}{'of 250 MiB':>12}  glibc / glibcxx")
    print(f"{'duckdb-extensions-layer':<28}{layer['zip_bytes'] / MiB:>10.1f}{layer['unzipped_bytes'] / MiB:>14.1f}")
    for name in args.bins:
        z = base / "functions" / name / "bootstrap.zip"
        if not z.is_file():
            problems.append(f"{z} is missing; run `make lambda`")
            continue
        size = unzipped(z)
        total = size + layer["unzipped_bytes"]
        glibc, glibcxx = max_versions(z)
        glibc_text = ".".join(map(str, glibc)) if glibc else "-"
        glibcxx_text = ".".join(map(str, glibcxx)) if glibcxx else "-"
        report["functions"][name] = {
            "zip_bytes": z.stat().st_size,
            "unzipped_bytes": size,
            "with_layer_bytes": total,
            "max_glibc": glibc_text,
            "max_glibcxx": glibcxx_text,
        }
        print(
            f"{name + '/bootstrap.zip':<28}{z.stat().st_size / MiB:>10.1f}{size / MiB:>14.1f}"
            f"{total / MiB:>13.1f}{100 * total / LIMIT:>11.0f}%  {glibc_text} / {glibcxx_text}"
        )
        if total > LIMIT:
            problems.append(
                f"{name}: {total} bytes unzipped with the layer, over Lambda's {LIMIT}-byte limit"
            )
        if glibc and glibc > AL2023_GLIBC:
            problems.append(f"{name}: needs GLIBC_{glibc_text}, newer than provided.al2023's 2.34")
        if glibcxx and glibcxx > AL2023_GLIBCXX:
            problems.append(f"{name}: needs GLIBCXX_{glibcxx_text}, newer than provided.al2023's 3.4.29")

    (base / "sizes.json").write_text(json.dumps(report, indent=2) + "\n")
    for p in problems:
        print(f"lambda-size: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
