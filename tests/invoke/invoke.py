#!/usr/bin/env python3
"""Local invoke test (`make invoke-test`, part of `make test`).

Every file in events/ is sent to its function running as a real Lambda custom runtime: the built
binary polls cargo-lambda's Runtime API emulator (`cargo lambda watch --only-lambda-apis`) and each
event goes in through `cargo lambda invoke --data-file`, exactly the path AWS uses (Runtime API
`next` / `response` / `error`). No Docker, nothing beyond 127.0.0.1: the stack is what
`sam local --docker-network host` would reach on a host, a throwaway PostgreSQL catalog and a
moto S3 endpoint (bucket `lake`: data under data/, blobs under din's prefix) started by the
`dq-stack` binary, seeded with `dqctl seed` like `make demo`; the extensions are read from a tree
laid out like the Lambda layer (<tmp>/opt/duckdb/extensions).

Events come from events/ (the samples shipped with the functions) and tests/invoke/events/ (routes
the samples do not cover). Every query sample names the seeded demo fleet (e.g. its first vehicle
did:erc721:137:0xbA57…:135114, seeded from DEMO_START so event ids are stable; the gRPC-web
bodies come from tests/invoke/grpc_web_events.py) and its expectation proves data was found.
They map to functions by file-name prefix (the longest that matches): materializer-*.json,
graphql-*.json, telemetry-graphql-*.json, fetch-graphql-*.json, fetch-*.json. A file with another
prefix fails the test (so nothing is silently skipped). telemetry-graphql and fetch-graphql are
template.yaml's TelemetryGraphqlFunction and FetchGraphqlFunction: the same graphql binary with
GRAPHQL_DIALECT=telemetry / fetch (graphql runs with GRAPHQL_DIALECT=dq, as GraphqlFunction).
Functions run one at a time in the order of FUNCTIONS;
inside a function the *-scheduled* events go first, then the rest by name. Between the materializer
and the query functions the materializer binary drains the lake in local mode (`--once`) so
queries see decoded data.

Assertions:
  materializer  a JSON object, no errorType, "action" equal to the event's action (scheduled
                events: "materialize"); an audit must report "clean": true.
  graphql/fetch an API Gateway HTTP response with statusCode 200; /query bodies are JSON with
                "data" and no "errors"; /grpc.* responses are gRPC-web with grpc-status 0 and a
                message frame. tests/invoke/expect/<event file name> may set "statusCode",
                "body" (exact JSON), "dataNotNull" (dotted paths under data; a number
                indexes a list), "grpcStatus", "messageContains" (strings a gRPC-web message
                frame must carry, e.g. the ids of the events that prove data was found), each
                with a "why".
`__DEV_TOKEN__` in an event is replaced by an RS256 token for the event's vehicle (its first
did:erc721, else the DID of its first `tokenId: N` under the function's DIMO_REGISTRY_CHAIN_ID /
VEHICLE_NFT_ADDRESS, as the telemetry dialect resolves it), signed by a key
made for the run whose JWKS is served on 127.0.0.1 (the query functions always get it as
TOKEN_EXCHANGE_ISSUER_URL / TOKEN_EXCHANGE_JWK_KEY_SET_URL: inside Lambda they refuse to start
without an issuer); this needs the venv's python (cryptography).

Each function's environment is the one `sam local invoke <LogicalId> --env-vars
tests/invoke/env-vars.json` gives it (Docker is not available here, so the emulator stands in for
sam's container): template.yaml's Globals and function variables resolved against the parameter
defaults, then the env-vars file's overrides (the local stack's paths, the run's issuer), each of
which must name a variable the template declares for that function (tests/invoke/template_env.py),
then the runtime's own AWS_LAMBDA_* variables.

The first invocation of each function measures its cold start under the emulator: process spawn
to first answer (runtime init: settings, DuckDB + extensions + catalog attach, then the first
event). The report (--report, default .local/invoke/report.json) keeps every timing.
"""

import argparse
import base64
import http.server
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import string
import tempfile
import threading
import time

import template_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Invocation order; event file-name prefix -> (binary, template.yaml function). One graphql
# function per GraphQL dialect, as template.yaml deploys them; each gets its environment from the
# template (tests/invoke/template_env.py) plus tests/invoke/env-vars.json, as `sam local invoke
# <function> --env-vars tests/invoke/env-vars.json` would.
FUNCTIONS = {
    "materializer": ("materializer", "MaterializerFunction"),
    "graphql": ("graphql", "GraphqlFunction"),
    "telemetry-graphql": ("graphql", "TelemetryGraphqlFunction"),
    "fetch-graphql": ("graphql", "FetchGraphqlFunction"),
    "fetch": ("fetch", "FetchFunction"),
}
QUERY_FUNCTIONS = {"graphql", "telemetry-graphql", "fetch-graphql", "fetch"}
# The telemetry dialect's defaults for tokenId -> did:erc721 (shared/graphql dialect settings).
DEFAULT_CHAIN_ID, DEFAULT_VEHICLE_CONTRACT = "137", "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF"
DUCKDB_VERSION, PLATFORM = "v1.5.4", "linux_amd64"
# The demo fleet's first day: event ids are KSUIDs that embed the event time, so a fixed start
# keeps the ids and index keys the sample events name (tests/invoke/grpc_web_events.py).
DEMO_START = "2026-12-01T00:00:00Z"
EXTENSIONS = ["ducklake", "icu", "postgres_scanner", "httpfs", "aws"]
INVOKE_TIMEOUT_S = 600


class Failure(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, log: pathlib.Path, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise Failure(f"the emulator exited ({proc.returncode}):\n{tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise Failure(f"the emulator did not listen on {port} within {timeout}s:\n{tail(log)}")


def tail(path: pathlib.Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def function_of(path: pathlib.Path):
    """The function an event file belongs to: the longest FUNCTIONS prefix of its name."""
    matches = [f for f in FUNCTIONS if path.name.startswith(f + "-")]
    return max(matches, key=len) if matches else None


def event_order(path: pathlib.Path):
    return (0 if "scheduled" in path.stem else 1, path.name)


# ---- assertions ---------------------------------------------------------------------------------


def check_materializer(event: dict, out) -> str:
    if not isinstance(out, dict):
        raise Failure(f"expected a JSON object, got {out!r}")
    if "errorType" in out:
        raise Failure(f"function error {out.get('errorType')}: {out.get('errorMessage')}")
    want = event.get("action", "materialize")
    if out.get("action") != want:
        raise Failure(f"summary action {out.get('action')!r}, expected {want!r}: {out}")
    if isinstance(out.get("skipped"), str):  # {"skipped": "lease held by a peer"}
        raise Failure(f"the action was skipped: {out}")
    if want == "audit" and out.get("clean") is not True:
        raise Failure(f"audit is not clean: {out}")
    keys = ", ".join(k for k in out if k != "action")
    return f"action={want} ({keys})"


def header(resp: dict, name: str):
    for k, v in (resp.get("headers") or {}).items():
        if k.lower() == name:
            return v
    for k, v in (resp.get("multiValueHeaders") or {}).items():
        if k.lower() == name and v:
            return v[0]
    return None


def grpc_web_frames(body: bytes):
    frames, i = [], 0
    while i + 5 <= len(body):
        flag, n = body[i], int.from_bytes(body[i + 1 : i + 5], "big")
        frames.append((flag, body[i + 5 : i + 5 + n]))
        i += 5 + n
    if i != len(body):
        raise Failure(f"gRPC-web body has {len(body) - i} trailing bytes that are not a frame")
    return frames


def check_http(event: dict, out, expect: dict) -> str:
    if not isinstance(out, dict) or "statusCode" not in out:
        raise Failure(f"expected an API Gateway HTTP response, got {str(out)[:500]}")
    status = out["statusCode"]
    want_status = expect.get("statusCode", 200)
    raw = out.get("body") or ""
    body = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
    if status != want_status:
        raise Failure(f"statusCode {status}, expected {want_status}: {body[:500]!r}")
    if "body" in expect:
        try:
            got = json.loads(body)
        except ValueError:
            got = body.decode(errors="replace")
        if got != expect["body"]:
            raise Failure(f"body {got!r}, expected {expect['body']!r}")
        return f"{status} body as expected"
    path = event.get("rawPath") or event.get("path") or ""
    ctype = (header(out, "content-type") or "").lower()
    if path.endswith("/query") and want_status == 200:
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise Failure(f"/query body is not JSON ({e}): {body[:500]!r}")
        if not isinstance(doc.get("data"), dict):
            raise Failure(f"/query body has no data object: {body[:500]!r}")
        if doc.get("errors") and not expect.get("allowErrors"):
            raise Failure(f"/query answered errors: {doc['errors']}")
        for dotted in expect.get("dataNotNull", []):
            value = doc["data"]
            for part in dotted.split("."):
                if isinstance(value, list) and part.isdigit():
                    value = value[int(part)] if int(part) < len(value) else None
                else:
                    value = value.get(part) if isinstance(value, dict) else None
            if value is None:
                raise Failure(f"data.{dotted} is null: {body[:500]!r}")
        return f"{status} data.{','.join(doc['data'])}"
    if path.startswith("/grpc."):
        if not ctype.startswith("application/grpc-web"):
            raise Failure(f"content-type {ctype!r} is not gRPC-web")
        frames = grpc_web_frames(body)
        trailers = {}
        for flag, payload in frames:
            if flag & 0x80:
                for line in payload.decode(errors="replace").split("\r\n"):
                    if ":" in line:
                        k, v = line.split(":", 1)
                        trailers[k.strip().lower()] = v.strip()
        grpc_status = header(out, "grpc-status") or trailers.get("grpc-status")
        want_grpc = str(expect.get("grpcStatus", 0))
        if grpc_status != want_grpc:
            raise Failure(
                f"grpc-status {grpc_status!r} ({header(out, 'grpc-message') or trailers.get('grpc-message')}), expected {want_grpc}"
            )
        data = [p for f, p in frames if not f & 0x80]
        if want_grpc == "0" and not data and not expect.get("allowEmpty"):
            raise Failure("gRPC-web response carries no message frame")
        # Protobuf strings travel as raw UTF-8, so a value the answer must carry is a substring.
        for text in expect.get("messageContains", []):
            if not any(text.encode() in p for p in data):
                raise Failure(f"no message frame contains {text!r}")
        return f"{status} grpc-status {grpc_status}, {len(data)} message frame(s), {sum(map(len, data))} bytes"
    if not body and want_status == 200 and not expect.get("allowEmpty"):
        raise Failure("empty body")
    return f"{status} {ctype or 'no content-type'} {len(body)} bytes"


# ---- development tokens -------------------------------------------------------------------------


class DevIssuer:
    """`__DEV_TOKEN__` in an event becomes an RS256 token for the event's vehicle (the first
    did:erc721 in it), signed by a key made here and published as a JWKS on 127.0.0.1, which the
    functions get as TOKEN_EXCHANGE_ISSUER_URL / TOKEN_EXCHANGE_JWK_KEY_SET_URL: the production
    validator, fed locally (claims as auth::dev::DevClaims::vehicle)."""

    PERMISSIONS = ["privilege:GetNonLocationHistory", "privilege:GetLocationHistory"]

    def __init__(self):
        try:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.asymmetric import padding, rsa
        except ImportError:
            raise Failure("the query functions need the run's token issuer: run with the venv's python (cryptography)")
        self._hashes, self._padding = hashes, padding
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        nums = self._key.public_key().public_numbers()
        b64 = lambda i: _b64url(i.to_bytes((i.bit_length() + 7) // 8, "big"))
        self.kid = "dq-invoke-test"
        jwks = json.dumps({"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                                     "n": b64(nums.n), "e": b64(nums.e)}]}).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200 if self.path == "/jwks.json" else 404)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(jwks if self.path == "/jwks.json" else b"{}")

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.issuer = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.env = {"TOKEN_EXCHANGE_ISSUER_URL": self.issuer,
                    "TOKEN_EXCHANGE_JWK_KEY_SET_URL": f"{self.issuer}/jwks.json"}

    def token(self, asset: str) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        claims = {"iss": self.issuer, "aud": ["dimo.zone"], "exp": now + 3600, "iat": now,
                  "permissions": self.PERMISSIONS, "sub": "0xdevlicense000000000000000000000000000000",
                  "asset": asset}
        signing = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        sig = self._key.sign(signing.encode(), self._padding.PKCS1v15(), self._hashes.SHA256())
        return f"{signing}.{_b64url(sig)}"

    def close(self):
        self._server.shutdown()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def event_file(path: pathlib.Path, tmp: pathlib.Path, issuer, env: dict) -> pathlib.Path:
    """The event as sent: `__DEV_TOKEN__` replaced by a token for the event's vehicle (a telemetry
    `tokenId: N` stands for the vehicle DID the function's settings in `env` make of it)."""
    text = path.read_text()
    if "__DEV_TOKEN__" not in text:
        return path
    # The subject may sit in a base64 body.
    event = json.loads(text)
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        body = base64.b64decode(body).decode(errors="replace")
    found = re.search(r"did:erc721:[0-9]+:0x[0-9a-fA-F]{40}:[0-9]+", text + body)
    token_id = re.search(r"tokenId:\s*([0-9]+)", body)
    if found:
        vehicle = found.group(0)
    elif token_id:
        chain = env.get("DIMO_REGISTRY_CHAIN_ID") or DEFAULT_CHAIN_ID
        contract = env.get("VEHICLE_NFT_ADDRESS") or DEFAULT_VEHICLE_CONTRACT
        vehicle = f"did:erc721:{chain}:{contract}:{token_id.group(1)}"
    else:
        raise Failure(f"{path.name} uses __DEV_TOKEN__ but names no did:erc721 vehicle or tokenId")
    out = tmp / "events" / path.name
    out.parent.mkdir(exist_ok=True)
    out.write_text(text.replace("__DEV_TOKEN__", issuer.token(vehicle)))
    return out


# ---- the run ------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description="invoke every events/*.json under the Lambda Runtime API emulator")
    target = os.environ.get("CARGO_TARGET_DIR", "/var/tmp/dq-target")
    venv = pathlib.Path(os.environ.get("DQ_VENV", ".venv"))
    venv = venv if venv.is_absolute() else ROOT / venv
    ap.add_argument("--bin-dir", default=f"{target}/debug", help="built binaries (default $CARGO_TARGET_DIR/debug)")
    ap.add_argument("--dqctl", help="dqctl binary for seeding (default: <bin-dir>/dqctl)")
    ap.add_argument("--events", action="append",
                    help="event directory (repeatable; default events/ and tests/invoke/events/)")
    ap.add_argument("--cargo-lambda", default=str(venv / "bin" / "cargo-lambda"))
    ap.add_argument("--extensions", default=os.environ.get("DUCKDB_EXTENSION_DIR", str(ROOT / ".extensions")))
    ap.add_argument("--layer", help="use this layer tree (e.g. .local/lambda/layer from `make layer`) as /opt "
                    "instead of links to --extensions")
    ap.add_argument("--report", default=str(ROOT / ".local" / "invoke" / "report.json"))
    ap.add_argument("--env-vars", default=str(ROOT / "deploy" / "sam-local-env.json"),
                    help="sam local --env-vars file applied over template.yaml's environment")
    ap.add_argument("--keep", action="store_true", help="keep the temporary stack and logs")
    args = ap.parse_args()

    bin_dir = pathlib.Path(args.bin_dir)
    cargo_lambda = pathlib.Path(args.cargo_lambda)
    if not cargo_lambda.is_file():
        print(f"invoke: {cargo_lambda} is missing; run `make deploy-tools`", file=sys.stderr)
        return 1

    events = {f: [] for f in FUNCTIONS}
    unknown = []
    dirs = args.events or [str(ROOT / "events"), str(ROOT / "tests" / "invoke" / "events")]
    for path in sorted(p for d in dirs for p in pathlib.Path(d).glob("*.json")):
        function = function_of(path)
        (events[function] if function else unknown).append(path)
    if unknown:
        print(f"invoke: no function for {[p.name for p in unknown]} (prefixes: {list(FUNCTIONS)})", file=sys.stderr)
        return 1
    dqctl = pathlib.Path(args.dqctl) if args.dqctl else bin_dir / "dqctl"
    needed = ["materializer", "dq-stack"] + [FUNCTIONS[f][0] for f in FUNCTIONS if events[f]]
    missing = [b for b in dict.fromkeys(needed) if not (bin_dir / b).is_file()]
    missing += [] if dqctl.is_file() else [str(dqctl)]
    if missing:
        print(f"invoke: {missing} not built in {bin_dir}; run `cargo build --workspace --all-targets`", file=sys.stderr)
        return 1

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="dq-invoke-"))
    logs = tmp / "logs"
    logs.mkdir()
    report = {"events": [], "cold_start_ms": {}, "bin_dir": str(bin_dir), "layer": args.layer}
    failures = []
    emulator = None
    stack_proc = None
    issuer = None
    try:
        # Every query function gets the run's issuer, as template.yaml gives them one: inside
        # Lambda they refuse to start without TOKEN_EXCHANGE_ISSUER_URL.
        if any(events[f] for f in QUERY_FUNCTIONS):
            issuer = DevIssuer()
        # The layer layout: /opt/duckdb/extensions/<version>/<platform>/<name>.duckdb_extension.
        # The layer layout under $TMP/opt (env-vars.json points DUCKDB_EXTENSION_DIR there):
        # /opt/duckdb/extensions/<version>/<platform>/<name>.duckdb_extension.
        opt_ext = tmp / "opt" / "duckdb" / "extensions"
        if args.layer:
            opt_ext.parent.mkdir(parents=True)
            opt_ext.symlink_to(pathlib.Path(args.layer).resolve() / "duckdb" / "extensions")
        else:
            ext_src = pathlib.Path(args.extensions).resolve() / DUCKDB_VERSION / PLATFORM
            (opt_ext / DUCKDB_VERSION / PLATFORM).mkdir(parents=True)
            for name in EXTENSIONS:
                src = ext_src / f"{name}.duckdb_extension"
                if not src.is_file():
                    raise Failure(f"{src} is missing; run `make extensions`")
                (opt_ext / DUCKDB_VERSION / PLATFORM / src.name).symlink_to(src)

        # What `sam local --docker-network host` would reach on the host: a PostgreSQL catalog and
        # an S3 endpoint with a bucket `lake` (dq-stack: the Rust tests' throwaway servers).
        stack_log = logs / "stack.log"
        stack_proc = subprocess.Popen([str(bin_dir / "dq-stack")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=stack_log.open("w"), text=True, cwd=tmp)
        line = stack_proc.stdout.readline()
        if not line:
            raise Failure(f"dq-stack did not start:\n{tail(stack_log)}")
        stack = json.loads(line)
        local = {
            "DQ_LOCAL_CATALOG_DSN": stack["catalog_dsn"],
            "DQ_LOCAL_S3_ENDPOINT": stack["s3_endpoint"],
            "DQ_LOCAL_S3_ACCESS_KEY_ID": stack["access_key"],
            "DQ_LOCAL_S3_SECRET_ACCESS_KEY": stack["secret_key"],
            "DQ_LOCAL_ISSUER": issuer.issuer if issuer is not None else "http://127.0.0.1:9",
        }

        template = template_env.Template(ROOT / "template.yaml")
        env_vars = template_env.load_env_vars(pathlib.Path(args.env_vars))
        # Where sam's container has the layer at /opt and a writable /tmp, the emulated functions
        # get directories of this run (the same variables, so the same declared-only rule).
        container = {"Parameters": {"HOME": str(tmp), "DUCKDB_EXTENSION_DIR": str(opt_ext),
                                    "DUCKDB_TEMP_DIRECTORY": str(tmp / "duckdb")}}
        layers = [env_vars, container]

        def expand(value: str) -> str:
            try:
                return string.Template(value).substitute(local)
            except KeyError as e:
                raise Failure(f"{args.env_vars}: no value for ${{{e.args[0]}}} (known: {sorted(local)})")

        try:
            template_env.check_env_vars(template, env_vars)
            # The seeding tools and the local drain run with the materializer's own environment.
            base_env = template_env.function_env(template, "MaterializerFunction", layers, expand)
        except template_env.TemplateEnvError as e:
            raise Failure(str(e))
        base_env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")

        # The local stack, seeded like `make demo` (same fleet, so sample events can name its subjects).
        t = time.monotonic()
        seed = subprocess.run(
            [str(dqctl), "seed", "--catalog", base_env["DUCKLAKE_CATALOG_DSN"],
             "--data-path", base_env["DUCKLAKE_DATA_PATH"],
             "--threshold", "1536", "--vehicles", "12", "--days", "2", "--seed", "7",
             "--start", DEMO_START, "--quiet"],
            env=base_env, capture_output=True, text=True, cwd=tmp,
        )
        if seed.returncode != 0:
            raise Failure(f"dqctl seed failed:\n{seed.stdout}\n{seed.stderr}")
        print(f"invoke: seeded a PostgreSQL catalog, data and blobs on S3 (moto) in {time.monotonic() - t:.1f}s")

        port = free_port()
        emu_log = logs / "emulator.log"
        emulator = subprocess.Popen(
            [str(cargo_lambda), "lambda", "watch", "--only-lambda-apis", "--invoke-address", "127.0.0.1",
             "--invoke-port", str(port), "--timeout", str(INVOKE_TIMEOUT_S)],
            cwd=ROOT, stdout=emu_log.open("w"), stderr=subprocess.STDOUT,
            # The caller's environment: it runs `cargo metadata`, which needs the real HOME (rustup).
            env={**os.environ, "PATH": f"{cargo_lambda.parent}:{os.environ.get('PATH', '')}"},
        )
        wait_port(port, emulator, emu_log)
        print(f"invoke: Runtime API emulator (cargo-lambda) on 127.0.0.1:{port}")

        drained = False
        for function in FUNCTIONS:
            if not events[function]:
                continue
            if function in QUERY_FUNCTIONS and not drained:
                # Decode everything so the query functions see data (local mode, no emulator).
                out = subprocess.run([str(bin_dir / "materializer"), "--once"], env=base_env,
                                     capture_output=True, text=True, cwd=tmp)
                if out.returncode != 0:
                    raise Failure(f"materializer --once failed:\n{out.stderr[-4000:]}")
                drained = True
            binary, logical_id = FUNCTIONS[function]
            try:
                env = template_env.function_env(template, logical_id, layers, expand)
            except template_env.TemplateEnvError as e:
                raise Failure(str(e))
            # What the Lambda runtime (and sam local) adds to every function's environment.
            env.update({
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "AWS_LAMBDA_RUNTIME_API": f"http://127.0.0.1:{port}/.rt",
                "AWS_LAMBDA_FUNCTION_NAME": logical_id,
                "AWS_LAMBDA_FUNCTION_VERSION": "1",
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "2048",
                "AWS_REGION": "us-east-1",
            })
            fn_log = logs / f"{function}.log"
            spawned = time.monotonic()
            proc = subprocess.Popen([str(bin_dir / binary)], env=env, cwd=tmp,
                                    stdout=fn_log.open("w"), stderr=subprocess.STDOUT)
            try:
                for i, path in enumerate(sorted(events[function], key=event_order)):
                    event = json.loads(path.read_text())
                    start = time.monotonic()
                    res = subprocess.run(
                        [str(cargo_lambda), "lambda", "invoke", "_", "--data-file", str(event_file(path, tmp, issuer, env)),
                         "--invoke-address", "127.0.0.1", "--invoke-port", str(port), "--output-format", "json"],
                        capture_output=True, text=True, cwd=ROOT, timeout=INVOKE_TIMEOUT_S + 30,
                    )
                    done = time.monotonic()
                    entry = {"event": path.name, "function": function, "ms": round((done - start) * 1000)}
                    if i == 0:
                        entry["cold_start_ms"] = round((done - spawned) * 1000)
                        report["cold_start_ms"][function] = entry["cold_start_ms"]
                    try:
                        if res.returncode != 0:
                            raise Failure(f"cargo lambda invoke exited {res.returncode}: {res.stderr.strip()[-2000:]}{res.stdout.strip()[-2000:]}")
                        try:
                            out = json.loads(res.stdout)
                        except ValueError:
                            raise Failure(f"the response is not JSON: {res.stdout[:500]!r}")
                        if function == "materializer":
                            detail = check_materializer(event, out)
                        else:
                            exp_path = ROOT / "tests" / "invoke" / "expect" / path.name
                            expect = json.loads(exp_path.read_text()) if exp_path.is_file() else {}
                            detail = check_http(event, out, expect)
                        entry["ok"] = True
                        print(f"  ok   {path.name:<44} {entry['ms']:>6} ms  {detail}"
                              + (f"  [cold start {entry['cold_start_ms']} ms]" if i == 0 else ""))
                    except Failure as e:
                        entry["ok"], entry["error"] = False, str(e)
                        failures.append(f"{path.name}: {e}")
                        print(f"  FAIL {path.name:<44} {e}")
                        if proc.poll() is not None:
                            print(f"  {function} exited ({proc.returncode}); its log:\n{tail(fn_log)}")
                    report["events"].append(entry)
                    if proc.poll() is not None:
                        # A crashed runtime cannot answer the rest; report them as failures.
                        for rest in sorted(events[function], key=event_order)[i + 1:]:
                            failures.append(f"{rest.name}: not invoked, {function} exited ({proc.returncode})")
                        break
            finally:
                stop(proc)
        if failures:
            print(f"invoke: last emulator log lines:\n{tail(emu_log, 15)}")
    except Failure as e:
        failures.append(str(e))
    finally:
        if emulator is not None:
            stop(emulator)
        if stack_proc is not None:
            # Closing its stdin lets dq-stack remove the cluster and the moto server.
            stack_proc.stdin.close()
            try:
                stack_proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop(stack_proc)
        if issuer is not None:
            issuer.close()
        report["failures"] = failures
        rp = pathlib.Path(args.report)
        rp.parent.mkdir(parents=True, exist_ok=True)
        rp.write_text(json.dumps(report, indent=2) + "\n")
        if args.keep or failures:
            print(f"invoke: stack and logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    n = len(report["events"])
    if failures:
        print(f"invoke: {len(failures)} failure(s):", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        return 1
    print(f"invoke: {n} event(s) passed; cold starts (spawn → first answer): "
          + ", ".join(f"{k} {v} ms" for k, v in report["cold_start_ms"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
