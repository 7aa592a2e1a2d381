// make playground-check: GraphiQL at `/`, used as a person would, in Debian's chromium (headless).
//
// Seeds a small lake (dqctl seed, then materializer --once), serves it with the graphql binary on
// 127.0.0.1 (dq dialect, the production token validator fed by a JWKS this script publishes), opens
// `/?token=<jwt>`, types a signalsLatest query for the seeded vehicle into the query editor, runs
// it, waits for the result pane, takes a screenshot, and asserts that the pane holds exactly the
// data /query answers for that query (non-null values from the lake), that the page's inline
// scripts ran under its Content-Security-Policy without a violation, and that the token left the
// address bar.
//
// Usage: node check.mjs --bin-dir <cargo target>/debug [--screenshot <png>] [--chromium <path>]
// Environment: DUCKDB_EXTENSION_DIR as for the binaries; the whole run is bounded (RUN_TIMEOUT_MS).

import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { chromium } from "playwright-core";

const RUN_TIMEOUT_MS = 240_000;
const STEP_TIMEOUT_MS = 60_000;

const args = parseArgs(process.argv.slice(2));
const binDir = args["bin-dir"];
const screenshot = args.screenshot;
const chromiumPath = args.chromium ?? "/usr/bin/chromium";
if (!binDir) fail("usage: node check.mjs --bin-dir <dir> [--screenshot <png>] [--chromium <path>]");
for (const bin of ["dqctl", "materializer", "graphql"]) {
  if (!fs.existsSync(path.join(binDir, bin))) fail(`no ${bin} in ${binDir}: build the workspace first (make build)`);
}
if (!fs.existsSync(chromiumPath)) fail(`no chromium at ${chromiumPath}: apt-get install chromium`);

const work = fs.mkdtempSync(path.join(os.tmpdir(), "dq-playground-"));
const children = [];
let jwks = null;
let context = null;

const deadline = setTimeout(() => {
  cleanup().finally(() => fail(`timed out after ${RUN_TIMEOUT_MS / 1000} s (work directory ${work})`));
}, RUN_TIMEOUT_MS);

try {
  await main();
  clearTimeout(deadline);
  await cleanup();
  fs.rmSync(work, { recursive: true, force: true });
  process.exit(0);
} catch (e) {
  clearTimeout(deadline);
  await cleanup();
  fail(`${e.message ?? e} (work directory kept: ${work})`);
}

async function main() {
  const lake = {
    DUCKLAKE_CATALOG_DSN: `ducklake:${work}/catalog.ducklake`,
    DUCKLAKE_DATA_PATH: `${work}/data`,
    BLOB_BUCKET: `${work}/blobs`,
    RUST_LOG: "warn",
  };

  step("seeding 2 vehicles × 1 day");
  const seed = await run(path.join(binDir, "dqctl"), [
    "seed", "--catalog", lake.DUCKLAKE_CATALOG_DSN, "--data-path", lake.DUCKLAKE_DATA_PATH,
    "--blob-dir", lake.BLOB_BUCKET, "--threshold", "1536", "--vehicles", "2", "--days", "1", "--seed", "7",
  ], lake);
  const vehicle = JSON.parse(seed).first_subjects?.[0];
  if (!/^did:erc721:\d+:0x[0-9a-fA-F]{40}:\d+$/.test(vehicle ?? "")) {
    throw new Error(`dqctl seed named no vehicle DID: ${seed.slice(0, 300)}`);
  }

  step("decoding (materializer --once)");
  await run(path.join(binDir, "materializer"), ["--once"], { ...lake, MATERIALIZER_EMF: "false" });

  const issuer = await startIssuer();
  const port = await freePort();
  step(`serving GraphQL (dq dialect) on 127.0.0.1:${port}`);
  const server = spawn(path.join(binDir, "graphql"), [], {
    env: {
      ...process.env, ...lake, DUCKLAKE_READ_ONLY: "true", PORT: String(port), GRAPHQL_DIALECT: "dq",
      TOKEN_EXCHANGE_ISSUER_URL: issuer.url, TOKEN_EXCHANGE_JWK_KEY_SET_URL: `${issuer.url}/jwks.json`,
    },
    stdio: ["ignore", "ignore", fs.openSync(path.join(work, "graphql.log"), "w")],
  });
  children.push(server);
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, server);

  const token = issuer.token(vehicle);
  const query = `{ signalsLatest(subject: "${vehicle}") { lastSeen speed { timestamp value } currentLocationCoordinates { value { latitude longitude } } } }`;
  const direct = await fetch(`${base}/query`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query }),
  }).then((r) => r.json());
  const latest = direct?.data?.signalsLatest;
  if (direct.errors || latest?.lastSeen == null || typeof latest?.speed?.value !== "number") {
    throw new Error(`/query has no latest speed for ${vehicle} to look for: ${JSON.stringify(direct).slice(0, 500)}`);
  }

  step(`opening ${base}/ in ${chromiumPath} (headless)`);
  const profile = path.join(work, "chromium-profile");
  fs.mkdirSync(profile);
  context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    chromiumSandbox: false,
    timeout: STEP_TIMEOUT_MS,
    viewport: { width: 1280, height: 800 },
    // The machine has no network: without these, chromium keeps dialing out.
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  context.setDefaultTimeout(STEP_TIMEOUT_MS);
  const page = context.pages()[0] ?? (await context.newPage());
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
  });
  // Not every violation reaches the console (e.g. blocked style elements): listen in the page.
  await page.addInitScript(() => {
    window.__cspViolations = [];
    document.addEventListener("securitypolicyviolation", (e) => {
      window.__cspViolations.push(`${e.effectiveDirective} blocked ${e.blockedURI || "inline"}`);
    });
  });
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));

  const response = await page.goto(`${base}/?token=${encodeURIComponent(token)}`, { waitUntil: "load" });
  expect(response?.status() === 200, `GET / answered ${response?.status()}`);
  const csp = response.headers()["content-security-policy"] ?? "";
  expect(csp.includes("script-src 'sha256-"), `no script-hash CSP on the page: ${csp}`);
  const title = await page.title();
  expect(title.includes("dq dialect"), `the title does not name the dialect: ${title}`);

  const editor = page.locator(".graphiql-query-editor .CodeMirror");
  try {
    await editor.waitFor({ state: "visible" });
  } catch (e) {
    const violations = await page.evaluate(() => window.__cspViolations).catch(() => []);
    throw new Error(`GraphiQL did not render (${e.message.split("\n")[0]}); CSP violations: ${violations.join("; ") || "none"}; ${problems.join("; ") || "no page errors"}`);
  }
  expect(!page.url().includes("token="), `the token stayed in the address bar: ${page.url()}`);
  const headersText = await page.evaluate(() =>
    [...document.querySelectorAll(".graphiql-editor-tool .CodeMirror")].map((e) => e.CodeMirror.getValue()).join("\n"),
  );
  expect(headersText.includes(`Bearer ${token}`), "the headers editor does not hold the token from ?token=");

  step("typing the query and running it");
  await editor.click();
  await page.keyboard.press("Control+A");
  await page.keyboard.press("Delete");
  await page.keyboard.type(query, { delay: 5 });
  // Close a hint popup the last keystroke may have opened.
  await page.keyboard.press("Escape");
  const typed = await page.evaluate(
    () => document.querySelector(".graphiql-query-editor .CodeMirror").CodeMirror.getValue(),
  );
  expect(typed.replace(/\s+/g, " ").trim() === query, `the editor holds ${JSON.stringify(typed)}, not the typed query`);
  // Prettify, as a person tidying a one-line query would, then run it.
  await page.getByRole("button", { name: /prettify/i }).click();
  await page.locator("button.graphiql-execute-button").click();

  // The result pane shows the answer as pretty JSON; read it back from the pane's lines.
  const pane = page.locator(".graphiql-response .CodeMirror");
  await page.waitForFunction(() => {
    const text = [...document.querySelectorAll(".graphiql-response .CodeMirror-line")].map((l) => l.textContent).join("\n");
    return text.includes('"signalsLatest"') && text.trim().endsWith("}");
  });
  await page.waitForTimeout(300);
  if (screenshot) {
    fs.mkdirSync(path.dirname(path.resolve(screenshot)), { recursive: true });
    await page.screenshot({ path: screenshot });
    step(`screenshot: ${screenshot}`);
  }
  const shown = await pane.evaluate((el) => el.CodeMirror.getValue());
  const domText = await pane.evaluate((el) =>
    [...el.querySelectorAll(".CodeMirror-line")].map((l) => l.textContent).join("\n"),
  );
  let parsed;
  try {
    parsed = JSON.parse(shown);
  } catch {
    throw new Error(`the result pane is not JSON: ${shown.slice(0, 500)}`);
  }
  expect(
    !parsed.errors && isDeepStrictEqual(parsed.data, direct.data),
    `the result pane shows ${shown.slice(0, 500)}, /query answered ${JSON.stringify(direct)}`,
  );
  for (const needle of [`"lastSeen": ${JSON.stringify(latest.lastSeen)}`, `"value": ${JSON.stringify(latest.speed.value)}`]) {
    expect(domText.includes(needle), `the result pane's DOM lacks ${needle}`);
  }

  const violations = await page.evaluate(() => window.__cspViolations);
  expect(violations.length === 0, `Content-Security-Policy violations: ${violations.join("; ")}`);
  expect(problems.length === 0, problems.join("\n"));
  const elsewhere = requests.filter((u) => !u.startsWith(base) && !u.startsWith("data:"));
  expect(elsewhere.length === 0, `the page requested other origins: ${elsewhere.join(", ")}`);
  step(`ok: the result pane shows ${vehicle}'s latest speed ${latest.speed.value} at ${latest.speed.timestamp}`);
}

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || argv[i + 1] === undefined) fail(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  return out;
}

function step(message) {
  console.log(`playground-check: ${message}`);
}

function fail(message) {
  console.error(`playground-check: FAILED: ${message}`);
  process.exit(1);
}

function expect(ok, message) {
  if (!ok) throw new Error(message);
}

function run(bin, argv, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, argv, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${path.basename(bin)} exited ${code}: ${stderr.slice(-1000)}`)),
    );
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitReady(base, child) {
  const until = Date.now() + STEP_TIMEOUT_MS;
  while (Date.now() < until) {
    if (child.exitCode !== null) {
      throw new Error(`graphql exited ${child.exitCode}: ${fs.readFileSync(path.join(work, "graphql.log"), "utf8").slice(-1000)}`);
    }
    try {
      const r = await fetch(`${base}/ready`);
      if (r.status === 200) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`graphql not ready on ${base} after ${STEP_TIMEOUT_MS / 1000} s`);
}

// A token issuer on 127.0.0.1: an RSA key, its JWKS, and RS256 tokens for a vehicle with the
// claims production tokens carry (as tests/invoke/invoke.py mints them).
function startIssuer() {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const { n, e } = publicKey.export({ format: "jwk" });
  const kid = "dq-playground-check";
  const body = JSON.stringify({ keys: [{ kty: "RSA", use: "sig", alg: "RS256", kid, n, e }] });
  return new Promise((resolve, reject) => {
    jwks = http.createServer((req, res) => {
      const found = req.url === "/jwks.json";
      res.writeHead(found ? 200 : 404, { "content-type": "application/json" });
      res.end(found ? body : "{}");
    });
    jwks.on("error", reject);
    jwks.listen(0, "127.0.0.1", () => {
      const url = `http://127.0.0.1:${jwks.address().port}`;
      const b64 = (v) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");
      const token = (asset) => {
        const now = Math.floor(Date.now() / 1000);
        const claims = {
          iss: url, aud: ["dimo.zone"], exp: now + 3600, iat: now,
          permissions: ["privilege:GetNonLocationHistory", "privilege:GetLocationHistory"],
          sub: "0xdevlicense000000000000000000000000000000", asset,
        };
        const signing = `${b64({ alg: "RS256", typ: "JWT", kid })}.${b64(claims)}`;
        const sig = crypto.sign("sha256", Buffer.from(signing), privateKey).toString("base64url");
        return `${signing}.${sig}`;
      };
      resolve({ url, token });
    });
  });
}

async function cleanup() {
  if (context) await context.close().catch(() => {});
  context = null;
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  }
  if (jwks) jwks.close();
  jwks = null;
}
