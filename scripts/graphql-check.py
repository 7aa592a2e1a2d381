#!/usr/bin/env python3
"""Checks dq's GraphQL schemas with graphql-core (the Python port of graphql-js), an implementation
independent of the server's async-graphql. Run by shared/graphql/tests/it/graphql_core.rs with the
project venv (scripts/venv.sh installs graphql-core).

    graphql-check.py sdl                          each committed SDL loads and validates, and every
                                                  example document (README and docs/, events) validates
    graphql-check.py documents                    the example documents as JSON [{source, dialect, query}]
    graphql-check.py introspection DIALECT        the answer (JSON, on stdin) to the committed introspection
                                                  query rebuilds into the dialect's committed SDL

Example documents: ```graphql blocks of README.md and docs/*.md (dq unless the info string names the dialect, as in
```graphql telemetry) and the GraphQL bodies of events/*.json and tests/invoke/events/*.json (the
dialect from the file name, as tests/invoke picks the function: telemetry-graphql-, fetch-graphql-,
graphql-), and tests/reconcile/<dialect>/*.graphql. Exit status 1 with the reasons on any failure.
"""

import base64
import collections
import difflib
import json
import pathlib
import re
import sys
import urllib.parse

try:
    import graphql
    from graphql import (
        build_client_schema,
        build_schema,
        get_introspection_query,
        parse,
        print_ast,
        print_schema,
        validate,
        validate_schema,
    )
except ImportError as error:
    sys.exit(f"graphql-check: graphql-core is missing from {sys.prefix} ({error}): run scripts/venv.sh")

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIALECTS = ("dq", "telemetry", "fetch")
SCHEMA_DIR = ROOT / "shared/graphql/schema"
INTROSPECTION_QUERY = ROOT / "shared/graphql/tests/introspection-query.graphql"
EVENT_DIRS = ("events", "tests/invoke/events")
# Longest prefix first: telemetry-graphql- also starts with neither of the others.
EVENT_PREFIXES = (("telemetry-graphql-", "telemetry"), ("fetch-graphql-", "fetch"), ("graphql-", "dq"))


def sdl(dialect):
    return (SCHEMA_DIR / f"{dialect}.graphql").read_text()


def event_query(event):
    """The GraphQL document an HTTP API event sends to /query, or None."""
    if event.get("rawPath") != "/query":
        return None
    method = event.get("requestContext", {}).get("http", {}).get("method", "POST")
    if method == "GET":
        values = urllib.parse.parse_qs(event.get("rawQueryString", "")).get("query")
        return values[0] if values else None
    body = event.get("body")
    if not body:
        return None
    if event.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    return json.loads(body).get("query")


def documents():
    docs = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for m in re.finditer(r"^```graphql(?:[ \t]+(\w+))?[ \t]*\n(.*?)^```", text, re.M | re.S):
            line = text.count("\n", 0, m.start()) + 1
            docs.append({"source": f"{path.relative_to(ROOT)}:{line}", "dialect": m.group(1) or "dq", "query": m.group(2)})
    # The committed reconcile documents (dqctl reconcile's defaults), one folder per dialect.
    for path in sorted((ROOT / "tests" / "reconcile").glob("*/*.graphql")):
        docs.append({"source": str(path.relative_to(ROOT)), "dialect": path.parent.name, "query": path.read_text()})
    for folder in EVENT_DIRS:
        for path in sorted((ROOT / folder).glob("*.json")):
            dialect = next((d for p, d in EVENT_PREFIXES if path.name.startswith(p)), None)
            if dialect is None:
                continue
            query = event_query(json.loads(path.read_text()))
            if query is not None:
                docs.append({"source": f"{folder}/{path.name}", "dialect": dialect, "query": query})
    return docs


def check_sdl():
    failures = []
    schemas = {}
    for dialect in DIALECTS:
        try:
            schema = build_schema(sdl(dialect))
        except (graphql.GraphQLError, TypeError) as error:
            # One message per offending use: say each distinct one once, with its count.
            messages = collections.Counter(str(error).split("\n\n"))
            failures += [f"{dialect}.graphql does not load: {m} (x{n})" for m, n in messages.items()]
            continue
        errors = validate_schema(schema)
        failures += [f"{dialect}.graphql: {e.message}" for e in errors]
        schemas[dialect] = schema
    docs = documents()
    for folder in ("events/", "tests/reconcile/"):
        if not any(d["source"].startswith(folder) for d in docs):
            failures.append(f"no example document found in {folder}")
    for doc in docs:
        schema = schemas.get(doc["dialect"])
        if schema is None:
            failures.append(f"{doc['source']}: unknown dialect {doc['dialect']!r} or its SDL failed")
            continue
        try:
            errors = validate(schema, parse(doc["query"]))
        except graphql.GraphQLError as error:
            errors = [error]
        failures += [f"{doc['source']} ({doc['dialect']}): {e.message}" for e in errors]
    print(f"graphql-check: {len(schemas)} schemas and {len(docs)} example documents checked with graphql-core {graphql.__version__}")
    return failures


def check_introspection(dialect, answer):
    failures = []
    fixture = INTROSPECTION_QUERY.read_text()
    if print_ast(parse(fixture)) != print_ast(parse(get_introspection_query())):
        failures.append(f"{INTROSPECTION_QUERY.name} is not graphql-core's get_introspection_query()")
    if answer.get("errors") or not answer.get("data"):
        return failures + [f"{dialect}: the introspection query was refused: {answer}"]
    try:
        rebuilt = print_schema(build_client_schema(answer["data"]))
    except (graphql.GraphQLError, TypeError) as error:
        return failures + [f"{dialect}: the introspection answer does not build a schema: {error}"]
    committed = print_schema(build_schema(sdl(dialect)))
    if rebuilt != committed:
        diff = difflib.unified_diff(
            committed.splitlines(), rebuilt.splitlines(), f"{dialect}.graphql", "introspection", lineterm="", n=1
        )
        failures.append(f"{dialect}: the introspection answer does not rebuild into {dialect}.graphql:\n" + "\n".join(diff))
    return failures


def main(argv):
    if argv[:1] == ["sdl"] and len(argv) == 1:
        failures = check_sdl()
    elif argv[:1] == ["documents"] and len(argv) == 1:
        json.dump(documents(), sys.stdout, indent=1)
        return 0
    elif argv[:1] == ["introspection"] and len(argv) == 2 and argv[1] in DIALECTS:
        failures = check_introspection(argv[1], json.load(sys.stdin))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for failure in failures:
        print(f"graphql-check: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
