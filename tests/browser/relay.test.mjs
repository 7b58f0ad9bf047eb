// Headless Chromium against a live `starling relay`, through @moq/net 0.3.4.
//
// Run: cargo build -p starling && scripts/install-browser.sh && node --test tests/browser/
//
// One relay, one static server (the test page, bundled in memory with esbuild) and one
// Chromium (fresh --user-data-dir) are shared by the tests in this file; each test opens its
// own page, its own relay sessions and its own broadcast names.
//
// Pending tests, skipped until the relay features land (set STARLING_BROWSER_PENDING=1 to
// run them anyway):
//   (b) the WebSocket (QMux) endpoint on the relay's TCP port
//   (d) the status page at GET / (and GET /status.json)
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  artifactsDir,
  checkPrerequisites,
  consecutiveRun,
  evaluate,
  launchBrowser,
  referenceRelayBin,
  runCliSubscriber,
  startCliPublisher,
  startReferenceRelay,
  startRelay,
  startStaticServer,
  stopAllChildren,
  withTimeout,
} from "./harness.mjs";

const runPending = process.env.STARLING_BROWSER_PENDING === "1";
const pending = (reason) => (runPending ? false : reason);

const SERVED_VERSIONS = ["moq-lite-05", "moq-lite-06"];
const FRAMES = 5;

describe("browser (@moq/net in headless Chromium) against starling relay", { timeout: 180000 }, () => {
  let relay;
  let site;
  let browser;

  before(async () => {
    checkPrerequisites();
    // allSettled: whatever did start is assigned, so `after` can stop it even if another failed.
    const started = await Promise.allSettled([
      startRelay(),
      startStaticServer(),
      withTimeout(launchBrowser(), 45000, "launching chromium"),
    ]);
    [relay, site, browser] = started.map((s) => (s.status === "fulfilled" ? s.value : undefined));
    const failed = started.find((s) => s.status === "rejected");
    if (failed) throw failed.reason;
    console.error(`chromium ${browser.version}, relay ${relay.url}, test page ${site.url}`);
  });

  after(async () => {
    await browser?.close();
    await site?.close();
    await stopAllChildren();
  });

  // Adds the page console and relay log to a failure, so a CI log says what happened.
  async function explained(fn) {
    const consoleMark = browser?.console.length ?? 0;
    const relayMark = relay?.child.lines.length ?? 0;
    try {
      return await fn();
    } catch (err) {
      const pageLines = browser?.console.slice(consoleMark).map((l) => `  page ${l}`) ?? [];
      const relayLines = relay?.child.lines.slice(relayMark).map((l) => `  relay ${l.stream}: ${l.text}`) ?? [];
      err.message += `\n--- page console ---\n${pageLines.join("\n")}\n--- relay log ---\n${relayLines.join("\n")}`;
      throw err;
    }
  }

  async function receiveFromCli(t, transport, broadcast, via = relay) {
    const track = "chat";
    const publisher = startCliPublisher({ relayUrl: via.url, broadcast, track });
    const page = await browser.openTestPage(site.url);
    try {
      const result = await evaluate(
        page,
        (opts) => window.starling.receive(opts),
        { relay: via.url, transport, broadcast, track, count: FRAMES, timeoutMs: 20000 },
        25000,
        `page receive over ${transport}`,
      );
      t.diagnostic(`@moq/net negotiated ${result.info.version} over ${result.info.transport}`);
      t.diagnostic(`received ${JSON.stringify(result.frames)}`);
      assert.equal(result.info.transport, transport);
      assert.ok(SERVED_VERSIONS.includes(result.info.version), `negotiated ${result.info.version}`);

      const texts = result.frames.map((f) => f.text);
      assert.equal(texts.length, FRAMES);
      const first = consecutiveRun(texts, "line-");
      assert.ok(first >= 1 && first + FRAMES - 1 <= publisher.written, `run starts at line-${first}`);
      // --group-frames 1: each line is a group of its own, numbered one after another (in
      // whatever order the groups' streams arrived).
      const byGroup = [...result.frames].sort((x, y) => x.group - y.group);
      byGroup.forEach((f, i) => {
        assert.equal(f.frame, 0, `frame index in ${JSON.stringify(f)}`);
        if (i < byGroup.length - 1) {
          assert.equal(f.group, byGroup[0].group + i, `group numbers in ${JSON.stringify(result.frames)}`);
        } else if (i > 0) {
          assert.ok(f.group > byGroup[i - 1].group, `group numbers in ${JSON.stringify(result.frames)}`);
        }
      });
      return result;
    } finally {
      await page.close();
      await publisher.stop();
    }
  }

  it("(a) page receives `starling publish` frames over WebTransport, certificate pinned from /certificate.sha256", { timeout: 60000 }, (t) =>
    explained(async () => {
      assert.equal(relay.cors, "*", "GET /certificate.sha256 must allow any origin");
      const result = await receiveFromCli(t, "webtransport", "cli-to-browser");
      assert.equal(result.info.certificateHash, relay.hash, "the page pinned the relay's own fingerprint");
    }),
  );

  it(
    "(b) page receives `starling publish` frames over WebSocket (QMux) only",
    { timeout: 60000 },
    (t) => explained(() => receiveFromCli(t, "websocket", "cli-to-browser-ws")),
  );

  // Runs now: the page's WebSocket-only path end to end, against the reference relay's own
  // WebSocket (QMux) endpoint, so (b) only waits for Starling's endpoint.
  it(
    "(b, reference) page receives `starling publish` frames over WebSocket only through moq-relay 0.17.10",
    { timeout: 60000, skip: referenceRelayBin ? false : "moq-relay 0.17.10 not installed (scripts/install-peers.sh)" },
    (t) =>
      explained(async () => {
        const reference = await startReferenceRelay();
        try {
          await receiveFromCli(t, "websocket", "cli-to-browser-ws-reference", reference);
        } catch (err) {
          err.message += `\n--- moq-relay ---\n${reference.child.tail()}`;
          throw err;
        } finally {
          await reference.child.stop();
        }
      }),
  );

  it("(c) page publishes a broadcast over WebTransport that `starling subscribe` receives", { timeout: 60000 }, (t) =>
    explained(async () => {
      const broadcast = "browser-to-cli";
      const track = "chat";
      const page = await browser.openTestPage(site.url);
      let id;
      try {
        const started = await evaluate(
          page,
          (opts) => window.starling.startPublishing(opts),
          { relay: relay.url, transport: "webtransport", broadcast, track, prefix: "msg-", intervalMs: 50 },
          15000,
          "page startPublishing",
        );
        id = started.id;
        t.diagnostic(`@moq/net negotiated ${started.info.version} over ${started.info.transport}`);
        assert.equal(started.info.transport, "webtransport");
        assert.ok(SERVED_VERSIONS.includes(started.info.version), `negotiated ${started.info.version}`);

        const lines = await runCliSubscriber({ relayUrl: relay.url, broadcast, track, count: FRAMES, timeoutMs: 20000 });
        assert.equal(lines.length, FRAMES, `stdout: ${JSON.stringify(lines)}`);
        consecutiveRun(lines, "msg-");
        t.diagnostic(`starling subscribe printed ${JSON.stringify(lines)}`);
      } finally {
        if (id !== undefined) {
          await evaluate(page, (i) => window.starling.stopPublishing(i), id, 5000, "page stopPublishing").catch(() => {});
        }
        await page.close();
      }
    }),
  );

  // Runs now: checks the forcing mechanism (b) relies on, against a stand-in HTTP server that
  // records the WebSocket upgrade instead of a relay that does not speak WebSocket yet.
  it("forcing @moq/net onto WebSocket dials ws:// offering qmux-01.moq-lite-05 and never tries WebTransport", { timeout: 30000 }, (t) =>
    explained(async () => {
      const requests = [];
      const upgrades = [];
      const standIn = createServer((req, res) => {
        requests.push(req.url);
        res.writeHead(404).end();
      });
      standIn.on("upgrade", (req, socket) => {
        upgrades.push({ url: req.url, protocols: (req.headers["sec-websocket-protocol"] ?? "").split(/\s*,\s*/) });
        socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
      });
      await new Promise((r) => standIn.listen(0, "127.0.0.1", r));
      const page = await browser.openTestPage(site.url);
      try {
        const url = `http://127.0.0.1:${standIn.address().port}/`;
        const result = await evaluate(
          page,
          (opts) => window.starling.connect(opts),
          { relay: url, transport: "websocket", timeoutMs: 5000 },
          10000,
          "page connect over websocket",
        );
        assert.equal(result.ok, false, "the stand-in refuses the upgrade");
        assert.equal(upgrades.length, 1, `upgrades: ${JSON.stringify(upgrades)}`);
        assert.ok(upgrades[0].protocols.includes("qmux-01.moq-lite-05"), `offered ${upgrades[0].protocols}`);
        assert.deepEqual(requests, [], "no WebTransport bootstrap (GET /certificate.sha256) was attempted");
        // Also what the page can reach on the real relay's TCP port today.
        const live = await evaluate(
          page,
          (opts) => window.starling.connect(opts),
          { relay: relay.url, transport: "websocket", timeoutMs: 5000 },
          10000,
          "page connect to the relay over websocket",
        );
        t.diagnostic(`offered subprotocols: ${upgrades[0].protocols.join(", ")}`);
        t.diagnostic(`websocket to the relay today: ${JSON.stringify(live)}`);
      } finally {
        await page.close();
        await new Promise((r) => standIn.close(r));
      }
    }),
  );

  it(
    "(d) the status page GET / lists the page's own broadcast (screenshot: artifacts/status-page.png)",
    { timeout: 60000 },
    () =>
      explained(async () => {
        const broadcast = "browser-status-check";
        const publisherPage = await browser.openTestPage(site.url);
        const statusPage = await browser.context.newPage();
        let id;
        try {
          const started = await evaluate(
            publisherPage,
            (opts) => window.starling.startPublishing(opts),
            { relay: relay.url, transport: "webtransport", broadcast, track: "chat", intervalMs: 100 },
            15000,
            "page startPublishing",
          );
          id = started.id;
          const status = await fetch(new URL("/status.json", relay.url), { signal: AbortSignal.timeout(5000) });
          assert.equal(status.status, 200, "GET /status.json");
          await statusPage.goto(relay.url, { timeout: 10000 });
          // The page may render its list after loading (or refresh it): wait for the name.
          await statusPage.waitForFunction((name) => document.body?.innerText.includes(name), broadcast, {
            timeout: 15000,
          });
          mkdirSync(artifactsDir, { recursive: true });
          await statusPage.screenshot({ path: join(artifactsDir, "status-page.png"), fullPage: true });
        } finally {
          if (id !== undefined) {
            await evaluate(publisherPage, (i) => window.starling.stopPublishing(i), id, 5000, "stopPublishing").catch(() => {});
          }
          await statusPage.close();
          await publisherPage.close();
        }
      }),
  );
});
