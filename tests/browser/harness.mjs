// Shared plumbing for the browser tests: child processes (relay, CLI), free ports, the static
// server for the test page (bundled in memory with esbuild), and headless Chromium through
// playwright-core. Everything waits on events (log lines, HTTP answers, process exits) under a
// bounded deadline; nothing sleeps in place of an event.
import { spawn } from "node:child_process";
import { createSocket } from "node:dgram";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, "../..");
export const artifactsDir = join(repoRoot, "artifacts");

export const starlingBin = process.env.STARLING_BIN ?? join(repoRoot, "target/debug/starling");
export const chromiumPath = process.env.STARLING_CHROMIUM ?? "/usr/bin/chromium";

/** Chromium flags the suite runs with (Playwright adds its own automation flags). */
export const chromiumArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export function checkPrerequisites() {
  if (!existsSync(starlingBin)) {
    throw new Error(`${starlingBin} is missing: run \`cargo build -p starling\` first (or set STARLING_BIN)`);
  }
  if (!existsSync(chromiumPath)) {
    throw new Error(`${chromiumPath} is missing: run scripts/install-browser.sh first (or set STARLING_CHROMIUM)`);
  }
}

/** Rejects with a clear message when `promise` has not settled after `ms`. */
export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const ansi = /\x1b\[[0-9;]*m/g;

/** A spawned child whose stdout/stderr lines are kept and can be awaited. */
class Child {
  constructor(name, command, args, options = {}) {
    this.name = name;
    this.lines = []; // { stream, text }
    this.waiters = new Set();
    this.proc = spawn(command, args, {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1", ...options.env },
    });
    this.proc.stdin.on("error", () => {}); // EPIPE once the child is gone
    this.exited = new Promise((resolveExit) => {
      this.proc.on("exit", (code, signal) => resolveExit({ code, signal }));
      this.proc.on("error", (err) => resolveExit({ code: null, signal: null, error: err }));
    });
    this.exitedClose = new Promise((resolveClose) => this.proc.on("close", resolveClose));
    for (const stream of ["stdout", "stderr"]) {
      createInterface({ input: this.proc[stream] }).on("line", (raw) => {
        const text = raw.replace(ansi, "");
        this.lines.push({ stream, text });
        for (const waiter of this.waiters) waiter(stream, text);
      });
    }
  }

  stdoutLines() {
    return this.lines.filter((l) => l.stream === "stdout").map((l) => l.text);
  }

  /** The last lines of output, for failure messages. */
  tail(n = 30) {
    return this.lines
      .slice(-n)
      .map((l) => `  ${this.name} ${l.stream}: ${l.text}`)
      .join("\n");
  }

  /** Resolves with the first line matching `pattern` (already seen or future), rejects on exit. */
  waitForLine(pattern, ms, stream) {
    const seen = this.lines.find((l) => (!stream || l.stream === stream) && pattern.test(l.text));
    if (seen) return Promise.resolve(seen.text);
    let waiter;
    const found = new Promise((resolveLine, rejectLine) => {
      waiter = (s, text) => {
        if ((!stream || s === stream) && pattern.test(text)) resolveLine(text);
      };
      this.waiters.add(waiter);
      this.exited.then(({ code, signal }) =>
        rejectLine(new Error(`${this.name} exited (code ${code}, signal ${signal}) before printing ${pattern}\n${this.tail()}`)),
      );
    });
    return withTimeout(found, ms, `${this.name}: waiting for ${pattern}\n${this.tail()}`).finally(() =>
      this.waiters.delete(waiter),
    );
  }

  /** SIGTERM, then SIGKILL if the child has not exited after `graceMs`. */
  async stop(graceMs = 3000) {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill("SIGTERM");
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

const children = new Set();
process.on("exit", () => {
  for (const child of children) child.proc.kill("SIGKILL");
});

export function spawnChild(name, command, args, options) {
  const child = new Child(name, command, args, options);
  children.add(child);
  child.exited.then(() => children.delete(child));
  return child;
}

export async function stopAllChildren() {
  await Promise.all([...children].map((c) => c.stop()));
}

function listenTcp(port) {
  return new Promise((resolvePort, reject) => {
    const server = createNetServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const { port: bound } = server.address();
      server.close(() => resolvePort(bound));
    });
  });
}

function bindUdp(port) {
  return new Promise((resolveBind, reject) => {
    const socket = createSocket("udp4");
    socket.once("error", reject);
    socket.bind(port, "127.0.0.1", () => socket.close(() => resolveBind(port)));
  });
}

/** A port free on 127.0.0.1 for both TCP and UDP (the relay binds both with one number). */
export async function freePort() {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await listenTcp(0);
    try {
      await bindUdp(port);
      return port;
    } catch {
      // UDP side taken: try another
    }
  }
  throw new Error("no free TCP+UDP port on 127.0.0.1");
}

async function getText(url, ms = 2000) {
  const res = await fetch(url, { signal: AbortSignal.timeout(ms) });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/**
 * Starts `starling relay --bind 127.0.0.1:PORT` on a free port and waits for its
 * "relay listening" log line and for GET /certificate.sha256 to answer with the fingerprint
 * the log line names. Retries on another port when the bind loses a race.
 */
export async function startRelay(args = [], name = "relay") {
  let lastError;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const child = spawnChild(name, starlingBin, ["relay", "--bind", `127.0.0.1:${port}`, ...args]);
    try {
      const line = await child.waitForLine(/relay listening/, 15000);
      const logged = /fingerprint="?([0-9a-f]{64})/.exec(line)?.[1];
      const url = `http://127.0.0.1:${port}/`;
      const cert = await getText(new URL("/certificate.sha256", url));
      const hash = cert.text.trim();
      if (cert.status !== 200 || !/^[0-9a-f]{64}$/.test(hash)) {
        throw new Error(`GET /certificate.sha256 -> ${cert.status} ${cert.text}`);
      }
      if (logged && logged !== hash) throw new Error(`log fingerprint ${logged} != served ${hash}`);
      return { child, port, url, hash, cors: cert.headers.get("access-control-allow-origin") };
    } catch (err) {
      lastError = err;
      await child.stop();
    }
  }
  throw lastError;
}

/**
 * Two Starling relays of a cluster: `origin` (cluster id 1001) and `edge` (1002), which dials
 * the origin as its cluster peer with the origin's certificate pinned.
 */
export async function startStarlingCluster() {
  const origin = await startRelay(["--cluster-id", "1001"], "origin");
  const edge = await startRelay(
    ["--cluster-id", "1002", "--cluster-connect", `https://127.0.0.1:${origin.port}/`,
      "--connect-tls-fingerprint", origin.hash],
    "edge",
  );
  return { origin, edge };
}

/**
 * What the media tests share: a Starling cluster (`origin`, `edge`), the static server for the
 * test pages and Chromium with a fake camera and microphone (`args`). Whatever started is
 * returned even when another part failed (`error`), so the caller can stop it.
 */
export async function startMediaStage(args) {
  checkPrerequisites();
  const started = await Promise.allSettled([
    startStarlingCluster(),
    startStaticServer(),
    withTimeout(launchBrowser({ args }), 45000, "launching chromium"),
  ]);
  const [cluster, site, browser] = started.map((s) => (s.status === "fulfilled" ? s.value : undefined));
  const failed = started.find((s) => s.status === "rejected");
  return { ...cluster, site, browser, error: failed?.reason };
}

/** The reference moq-relay 0.17.10 (scripts/install-peers.sh), when this machine has it. */
export const referenceRelayBin = [
  process.env.STARLING_MOQ_RELAY,
  join(process.env.STARLING_CACHE ?? join(homedir(), ".cache/starling"), "moq-relay-0.17.10/bin/moq-relay"),
].find((p) => p && existsSync(p));

/** moq-dev's media router, moq-cli 0.14.10 (scripts/install-peers.sh), when this machine has it. */
export const moqCliBin = [
  process.env.STARLING_MOQ_CLI,
  join(process.env.STARLING_CACHE ?? join(homedir(), ".cache/starling"), "moq-cli-0.14.10/bin/moq"),
].find((p) => p && existsSync(p));

/** Debian's ffmpeg (scripts/install-ffmpeg.sh), when installed. */
export const ffmpegBin = ["/usr/bin/ffmpeg"].find((p) => existsSync(p));

/**
 * Starts the reference moq-relay on a free port (QUIC on UDP, HTTP with its WebSocket
 * endpoint on TCP, anonymous access) and waits for both of its "listening" log lines. `args`
 * are added (cluster flags); the result carries its certificate's SHA-256 (`hash`).
 */
export async function startReferenceRelay(args = [], name = "moq-relay") {
  const port = await freePort();
  const bind = `127.0.0.1:${port}`;
  const child = spawnChild(name, referenceRelayBin, [
    "--listen", bind,
    "--listen-tls-generate", "localhost",
    "--web-http-listen", bind,
    "--auth-public", "**",
    "--log-level", "info",
    ...args,
  ]);
  try {
    await child.waitForLine(/listening .*kind="http"/, 15000);
    await child.waitForLine(/listening .*kind="quic"/, 15000);
    const url = `http://${bind}/`;
    const hash = (await getText(new URL("/certificate.sha256", url))).text.trim();
    return { child, port, url, hash };
  } catch (err) {
    await child.stop();
    throw err;
  }
}

/**
 * `starling publish … stdin --track TRACK` fed `${prefix}N` lines every `intervalMs` until
 * stopped: the subscriber joins at the live edge, so lines keep coming.
 */
export function startCliPublisher({ relayUrl, broadcast, track, prefix = "line-", intervalMs = 50 }) {
  const child = spawnChild(`publish(${broadcast})`, starlingBin, [
    "publish",
    "--url",
    relayUrl,
    "--broadcast",
    broadcast,
    "stdin",
    "--track",
    track,
  ]);
  let written = 0;
  const write = () => {
    if (!child.proc.stdin.writable) return;
    written += 1;
    child.proc.stdin.write(`${prefix}${written}\n`);
  };
  write();
  const timer = setInterval(write, intervalMs);
  child.exited.then(() => clearInterval(timer));
  return {
    child,
    get written() {
      return written;
    },
    async stop() {
      clearInterval(timer);
      child.proc.stdin.end();
      await child.stop();
    },
  };
}

/** GET /status.json of a Starling relay. */
export async function relayStatus(relay) {
  const res = await fetch(new URL("/status.json", relay.url), { signal: AbortSignal.timeout(5000) });
  if (res.status !== 200) throw new Error(`GET /status.json -> ${res.status}`);
  return res.json();
}

/** Runs `starling subscribe … --count N` to completion and returns its stdout lines. */
export async function runCliSubscriber({ relayUrl, broadcast, track, count, timeoutMs = 20000 }) {
  const child = spawnChild(`subscribe(${broadcast})`, starlingBin, [
    "subscribe",
    "--url",
    relayUrl,
    "--tls-disable-verify",
    "--broadcast",
    broadcast,
    "--track",
    track,
    "--count",
    String(count),
  ]);
  try {
    const { code, signal, error } = await withTimeout(child.exited, timeoutMs, `starling subscribe ${broadcast}/${track}`);
    await withTimeout(child.exitedClose, 2000, "subscribe output");
    if (error || code !== 0) {
      throw new Error(`starling subscribe exited (code ${code}, signal ${signal}, ${error ?? ""})\n${child.tail()}`);
    }
    return child.stdoutLines();
  } catch (err) {
    err.message += `\n${child.tail()}`;
    throw err;
  } finally {
    await child.stop();
  }
}

/** Bundles a page script (page/app.js, page/media.js, with their npm imports) in memory. */
export async function bundlePage(entry = "app.js") {
  const esbuild = await import("esbuild");
  const result = await esbuild.build({
    entryPoints: [join(here, "page", entry)],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "chrome120",
    write: false,
    sourcemap: "inline",
    logLevel: "silent",
  });
  return result.outputFiles[0].contents;
}

/** A static server on 127.0.0.1 (`port`, default any free one) for the test pages and their bundles. */
export async function startStaticServer(port = 0) {
  const html = (file) => ({ type: "text/html; charset=utf-8", body: readFileSync(join(here, "page", file)) });
  const script = async (entry) => ({ type: "text/javascript; charset=utf-8", body: await bundlePage(entry) });
  const files = new Map([
    ["/", html("index.html")],
    ["/app.js", await script("app.js")],
    ["/media.html", html("media.html")],
    ["/media.js", await script("media.js")],
  ]);
  const server = createServer((req, res) => {
    const path = new URL(req.url, "http://x").pathname;
    if (path === "/favicon.ico") {
      res.writeHead(204).end();
      return;
    }
    const file = files.get(path);
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": file.type, "cache-control": "no-store" }).end(file.body);
  });
  await new Promise((resolveListen) => server.listen(port, "127.0.0.1", resolveListen));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    close: () => new Promise((resolveClose) => server.close(resolveClose)),
  };
}

/**
 * Headless Chromium (Debian's /usr/bin/chromium) with a fresh --user-data-dir. Playwright
 * owns --user-data-dir, so it is passed as launchPersistentContext's directory.
 */
export async function launchBrowser({ args = [] } = {}) {
  const { chromium } = await import("playwright-core");
  const userDataDir = mkdtempSync(join(tmpdir(), "starling-chromium-"));
  const console = [];
  let context;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: chromiumPath,
      headless: true,
      chromiumSandbox: false,
      args: [...chromiumArgs, ...args],
      timeout: 30000,
      viewport: { width: 1280, height: 800 },
    });
  } catch (err) {
    rmSync(userDataDir, { recursive: true, force: true });
    throw err;
  }
  const version = context.browser()?.version() ?? (await versionOf(context));
  return {
    context,
    version,
    console,
    /** Opens the test page and waits for its module to initialise. */
    async openTestPage(url) {
      const page = await context.newPage();
      page.setDefaultTimeout(15000);
      page.on("console", (msg) => console.push(`${msg.type()}: ${msg.text()}`));
      page.on("pageerror", (err) => console.push(`pageerror: ${err.message}`));
      await page.goto(url);
      await page.waitForFunction(() => window.starlingReady === true, null, { timeout: 10000 });
      return page;
    },
    async close() {
      await withTimeout(context.close(), 15000, "closing chromium").catch(() => {});
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

async function versionOf(context) {
  const page = await context.newPage();
  try {
    return await page.evaluate(() => navigator.userAgent);
  } finally {
    await page.close();
  }
}

/** page.evaluate with a deadline, so a stuck page fails the test rather than hanging it. */
export function evaluate(page, fn, arg, ms, what) {
  return withTimeout(page.evaluate(fn, arg), ms, what);
}

/** Asserts `texts` are `${prefix}K`, `${prefix}K+1`, … and returns K. */
export function consecutiveRun(texts, prefix) {
  const numbers = texts.map((t) => {
    const m = new RegExp(`^${prefix}(\\d+)$`).exec(t);
    if (!m) throw new Error(`unexpected payload ${JSON.stringify(t)} (want ${prefix}N) in ${JSON.stringify(texts)}`);
    return Number(m[1]);
  });
  // Each payload is its own group, and groups travel on independent streams (newest first
  // when several are in flight), so arrival order may differ; none may be missing.
  // A reader that stops after N arrivals may miss a group overtaken at the very end; below the
  // newest, none may be missing or repeated.
  numbers.sort((a, b) => a - b);
  numbers.forEach((n, i) => {
    const last = i === numbers.length - 1;
    const ok = last ? n > numbers[i - 1] || numbers.length === 1 : n === numbers[0] + i;
    if (!ok) throw new Error(`payloads are not consecutive: ${JSON.stringify(texts)}`);
  });
  return numbers[0];
}
