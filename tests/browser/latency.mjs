// Capture-to-render latency of a camera through relays, as a person sees it: @moq/publish
// 0.2.17 publishes Chromium's fake camera and microphone, @moq/watch 0.4.6 plays it in a
// second page (media-run.mjs), and every painted frame's latency is its paint time minus its
// capture time on the one machine clock. Four topologies side by side in one run, in rounds
// so that machine noise falls on all of them alike:
//   starling x1    publisher and player on one Starling relay
//   starling x2    publisher on a Starling origin, player on a Starling edge of its cluster
//   moq-relay x1   the same through moq-relay 0.17.10
//   moq-relay x2   a moq-relay origin and a moq-relay edge dialing it (--cluster-connect)
// over WebTransport and over the WebSocket fallback. Every run also checks the media chunk
// for chunk (media-check.mjs): runs with a defect (a chunk corrupted, reordered or lost, or
// a group missing that the player did not discard itself) are counted beside the figures.
//
//   scripts/browser-latency.sh        (builds the release relay, then runs this)
//   ROUNDS=5 FRAMES=200 TRANSPORTS=webtransport,websocket node tests/browser/latency.mjs
//
// Prints a markdown table (p50 and p99 in ms over every painted frame of every round after
// each run's first SKIP frames) and writes the raw figures to $OUT (JSON) when set.
import { writeFileSync } from "node:fs";
import {
  checkPrerequisites,
  launchBrowser,
  referenceRelayBin,
  startReferenceRelay,
  startStarlingCluster,
  startStaticServer,
  stopAllChildren,
  withTimeout,
} from "./harness.mjs";
import { percentile } from "./media-check.mjs";
import { fakeMediaArgs, publishAndWatch } from "./media-run.mjs";

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const FRAMES = Number(process.env.FRAMES ?? 200);
const SKIP = Number(process.env.SKIP ?? 20);
const TRANSPORTS = (process.env.TRANSPORTS ?? "webtransport,websocket").split(",");

checkPrerequisites();
if (!referenceRelayBin) throw new Error("moq-relay 0.17.10 is not installed: run scripts/install-peers.sh");

async function moqRelayPair() {
  const origin = await startReferenceRelay(["--cluster-id", "2001"], "moq-relay-origin");
  const edge = await startReferenceRelay(
    ["--cluster-id", "2002", "--cluster-connect", `moqt://localhost:${origin.port}/`, "--connect-tls-insecure"],
    "moq-relay-edge",
  );
  return { origin, edge };
}

const [site, browser, starling, moqRelay] = await Promise.all([
  startStaticServer(),
  withTimeout(launchBrowser({ args: fakeMediaArgs }), 45000, "launching chromium"),
  startStarlingCluster(),
  moqRelayPair(),
]);

const cases = [];
for (const transport of TRANSPORTS) {
  for (const [relay, pair] of [["starling", starling], ["moq-relay", moqRelay]]) {
    cases.push({ relay, hops: 1, transport, publish: pair.origin, watch: pair.origin, latencies: [], runs: [], lost: 0, faulty: 0 });
    cases.push({ relay, hops: 2, transport, publish: pair.origin, watch: pair.edge, latencies: [], runs: [], lost: 0, faulty: 0 });
  }
}

try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const c of cases) {
      const name = `latency-${c.relay}-${c.hops}-${c.transport}-${round}.hang`;
      const result = await publishAndWatch(browser, site, {
        publishUrl: c.publish.url,
        watchUrl: c.watch.url,
        name,
        transport: c.transport,
        frames: FRAMES,
        skipFrames: SKIP,
        timeoutMs: 30000 + FRAMES * 200,
      });
      if (result.published.connected !== c.transport || result.watched.connected !== c.transport) {
        throw new Error(`${name}: connected over ${result.published.connected}/${result.watched.connected}`);
      }
      c.latencies.push(...result.latencies);
      c.runs.push({ p50: result.p50, spread: result.p99 - result.p50 });
      const lost = result.video.lost + result.audio.lost;
      c.lost += lost;
      if (result.defects.length > 0) c.faulty += 1;
      console.error(
        `round ${round} ${c.relay} x${c.hops} ${c.transport}: p50 ${result.p50.toFixed(1)} ms, p99 ${result.p99.toFixed(1)} ms, ` +
          `${result.latencies.length} frames, ${lost} groups lost` +
          (result.defects.length > 0 ? `\n  ${result.defects.slice(0, -1).join("\n  ")}` : ""),
      );
    }
  }
} finally {
  await browser.close();
  await site.close();
  await stopAllChildren();
}

const rows = cases.map((c) => ({
  relay: c.relay,
  hops: c.hops,
  transport: c.transport,
  frames: c.latencies.length,
  p50: percentile(c.latencies, 50),
  p99: percentile(c.latencies, 99),
  lost: c.lost,
  faulty: c.faulty,
  // Each run's frames share one offset (the publisher stamps capture times from its first
  // frame), so runs differ by tens of ms; within a run, p99 - p50 is free of it.
  runP50: percentile(c.runs.map((r) => r.p50), 50),
  spread: percentile(c.runs.map((r) => r.spread), 50),
  maxSpread: Math.max(...c.runs.map((r) => r.spread)),
}));
console.log(`Chromium fake camera, @moq/publish 0.2.17 -> relays -> @moq/watch 0.4.6; ${ROUNDS} rounds of ${FRAMES} frames per case\n`);
console.log("| transport | relays | Starling p50 | Starling p99 | moq-relay p50 | moq-relay p99 | median run's p50 (S / m) | p99 - p50 in a run, median / max (S / m) | frames (S / m) | runs with a media defect (S / m) | groups lost (S / m) |");
console.log("|---|---|---|---|---|---|---|---|---|---|---|");
for (const transport of TRANSPORTS) {
  for (const hops of [1, 2]) {
    const s = rows.find((r) => r.relay === "starling" && r.hops === hops && r.transport === transport);
    const m = rows.find((r) => r.relay === "moq-relay" && r.hops === hops && r.transport === transport);
    console.log(
      `| ${transport} | ${hops} | ${s.p50.toFixed(1)} | ${s.p99.toFixed(1)} | ${m.p50.toFixed(1)} | ${m.p99.toFixed(1)} | ${s.runP50.toFixed(1)} / ${m.runP50.toFixed(1)} | ${s.spread.toFixed(1)}, ${s.maxSpread.toFixed(1)} / ${m.spread.toFixed(1)}, ${m.maxSpread.toFixed(1)} | ${s.frames} / ${m.frames} | ${s.faulty} / ${m.faulty} | ${s.lost} / ${m.lost} |`,
    );
  }
}
if (process.env.OUT) writeFileSync(process.env.OUT, JSON.stringify({ rounds: ROUNDS, frames: FRAMES, rows }, null, 2));
