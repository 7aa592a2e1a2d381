#!/usr/bin/env python3
"""The settings cross-check (`make validate`, so `make test`): the environment variables dq's code
reads, the registry docs/settings.toml, the generated table docs/configuration.md and the
environment template.yaml gives each function must all agree.

1. Code -> registry: every variable the Rust sources of the functions and shared crates read
   (named `const X: &str = "X"` keys, and ALL_CAPS literals passed to a lookup such as
   `get("X")`, `std::env::var("X")`) is in the registry; every registry entry other than
   `library` ones is still read somewhere (no stale rows).
2. Registry -> template: each Lambda function of the translated template (aws-sam-translator)
   declares every `declared` variable of its kind, and nothing that its kind does not read;
   `absent` and `runtime` variables are never set on a Lambda function. `sam local invoke
   --env-vars` only overrides declared variables, so this is what makes local overrides apply.
   The optional container service (ECS task definition) may set only variables fetch reads.
3. Registry -> docs: docs/configuration.md is the registry rendered (`--write` regenerates it).

Run with the project venv: .venv/bin/python tests/template/check_settings.py [--write]
"""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

KINDS = ("materializer", "graphql", "fetch")
TEMPLATE_MODES = ("declared", "absent", "runtime", "library")
# Every Lambda function of the template and the binary (kind) it runs; a new function must be
# classified here before the check passes.
FUNCTION_KINDS = {
    "MaterializerFunction": "materializer",
    "MaintenanceFunction": "materializer",
    "GraphqlFunction": "graphql",
    "TelemetryGraphqlFunction": "graphql",
    "FetchGraphqlFunction": "graphql",
    "FetchFunction": "fetch",
}
# Crates whose reads are not the functions' settings: test support and the benchmark/CLI tools.
SKIP_CRATES = {"testkit"}
# ALL_CAPS literals in lookup position that are not environment variables.
NOT_SETTINGS = {"READ_ONLY"}

CONST_KEY = re.compile(r'const ([A-Z][A-Z0-9_]*): &str = "\1"')
# A call whose first argument is an ALL_CAPS literal with an underscore, or any ALL_CAPS literal
# given to std::env::var / var_os (PORT, HOME).
LOOKUP_KEY = re.compile(r'\b[a-z_][a-z0-9_]*\(\s*"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)"')
ENV_VAR_KEY = re.compile(r'\bvar(?:_os)?\(\s*"([A-Z][A-Z0-9_]*)"')

FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)
    return ok


def load_registry():
    path = ROOT / "docs" / "settings.toml"
    rows = tomllib.loads(path.read_text())["setting"]
    seen = set()
    for row in rows:
        name = row.get("name", "?")
        check(name not in seen, f"settings.toml: {name} is listed twice")
        seen.add(name)
        for field in ("readers", "default", "template", "doc"):
            check(field in row, f"settings.toml: {name} has no `{field}`")
        check(row.get("template") in TEMPLATE_MODES, f"settings.toml: {name}: template must be one of {TEMPLATE_MODES}")
        check(set(row.get("readers", [])) <= set(KINDS) and row.get("readers"),
              f"settings.toml: {name}: readers must be a non-empty subset of {KINDS}")
        if row.get("template") in ("absent", "runtime"):
            check(row.get("why"), f"settings.toml: {name} is {row.get('template')} but says no `why`")
    return rows


def code_reads():
    """name -> the crates whose non-test sources read it."""
    found = {}
    sources = list(ROOT.glob("shared/*/src/**/*.rs")) + list(ROOT.glob("functions/*/src/**/*.rs"))
    for path in sources:
        crate = path.relative_to(ROOT).parts[1]
        if crate in SKIP_CRATES:
            continue
        text = path.read_text()
        # Unit-test modules sit at the end of a file; their literals are fixtures, not reads.
        cut = text.find("#[cfg(test)]")
        if cut >= 0:
            text = text[:cut]
        for pattern in (CONST_KEY, LOOKUP_KEY, ENV_VAR_KEY):
            for m in pattern.finditer(text):
                if m.group(1) not in NOT_SETTINGS:
                    found.setdefault(m.group(1), set()).add(crate)
    return found


def check_code(rows):
    reads = code_reads()
    names = {r["name"] for r in rows}
    for name in sorted(set(reads) - names):
        check(False, f"{name} is read by {sorted(reads[name])} but missing from docs/settings.toml")
    for row in rows:
        if row["template"] != "library":
            check(row["name"] in reads, f"docs/settings.toml lists {row['name']}, which no code reads any more")
    return len(reads)


def lambda_environments(resources):
    out = {}
    for ident, res in resources.items():
        if res["Type"] != "AWS::Lambda::Function":
            continue
        env = res.get("Properties", {}).get("Environment", {}).get("Variables", {})
        out[ident] = set(env)
    return out


def container_environments(resources):
    out = {}
    for ident, res in resources.items():
        if res["Type"] != "AWS::ECS::TaskDefinition":
            continue
        for c in res.get("Properties", {}).get("ContainerDefinitions", []):
            out[f"{ident}/{c.get('Name', '?')}"] = {e["Name"] for e in c.get("Environment", [])}
    return out


def check_template(rows, resources):
    by_name = {r["name"]: r for r in rows}
    envs = lambda_environments(resources)
    for ident in sorted(envs):
        kind = FUNCTION_KINDS.get(ident)
        if not check(kind, f"template: {ident} is not classified in check_settings.FUNCTION_KINDS"):
            continue
        declared = envs[ident]
        for name in sorted(declared):
            row = by_name.get(name)
            if not check(row, f"template: {ident} sets {name}, which no code reads (not in docs/settings.toml)"):
                continue
            check(kind in row["readers"], f"template: {ident} sets {name}, which the {kind} function does not read")
            check(row["template"] in ("declared", "library"),
                  f"template: {ident} sets {name}, which settings.toml says is {row['template']}: {row.get('why', '')}")
        for row in rows:
            if row["template"] == "declared" and kind in row["readers"]:
                check(row["name"] in declared,
                      f"template: {ident} ({kind}) does not declare {row['name']}, so `sam local --env-vars` cannot set it")
    for ident, declared in sorted(container_environments(resources).items()):
        for name in sorted(declared):
            row = by_name.get(name)
            check(row and "fetch" in row["readers"] and row["template"] != "runtime",
                  f"template: container {ident} sets {name}, which fetch does not read")
    for ident in FUNCTION_KINDS:
        check(ident in envs, f"template: no function {ident} (check_settings.FUNCTION_KINDS names it)")
    return len(envs)


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(rows):
    head = [
        "# Configuration",
        "",
        "Every environment variable dq's functions read, generated from `docs/settings.toml` by",
        "`tests/template/check_settings.py --write` (which `make validate` runs without `--write`, failing",
        "when this file, the code or `template.yaml` disagree with the registry).",
        "",
        "Template: **declared** — `template.yaml` sets it on every function of the kinds that read it, so a",
        "parameter or `sam local invoke --env-vars` can change it; **absent** — deliberately not in the",
        "Lambda environment (why given); **runtime** — set by the Lambda runtime; **library** — read by a",
        "library dq links.",
        "",
        "| Variable | Read by | Default | Template | Meaning |",
        "|---|---|---|---|---|",
    ]
    body = []
    for r in sorted(rows, key=lambda r: r["name"]):
        mode = r["template"] + (f": {r['why']}" if r.get("why") else "")
        body.append(f"| `{r['name']}` | {', '.join(r['readers'])} | {cell(r['default'])} | {cell(mode)} | {cell(r['doc'])} |")
    return "\n".join(head + body) + "\n"


def main():
    write = "--write" in sys.argv[1:]
    rows = load_registry()
    scanned = check_code(rows)
    doc = ROOT / "docs" / "configuration.md"
    text = render(rows)
    if write:
        doc.write_text(text)
    else:
        check(doc.is_file() and doc.read_text() == text,
              "docs/configuration.md differs from docs/settings.toml: run tests/template/check_settings.py --write")
    from check_template import translate  # the one translation of the template (aws-sam-translator)
    from samcli.yamlhelper import yaml_parse

    resources = translate(yaml_parse((ROOT / "template.yaml").read_text()))["Resources"]
    functions = check_template(rows, resources)
    if FAILURES:
        for f in FAILURES:
            print(f"settings check failed: {f}", file=sys.stderr)
        sys.exit(1)
    print(f"settings: {len(rows)} in docs/settings.toml, {scanned} read by the code, {functions} functions' "
          "environments agree; docs/configuration.md up to date")


if __name__ == "__main__":
    main()
