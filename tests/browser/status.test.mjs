// The status page as a person uses it, in headless Chromium: the charts of the relay's last
// minutes fill in from /history.json and the live feed; a click on a broadcast opens its view
// (tracks, rates, subscribers, and the cluster peer it comes from); Watch plays it in the page
// with the player the relay serves itself (/assets/player.js, @moq/watch bundled by
// scripts/build-web.sh). Two relays of a cluster: the camera is published at the origin and
// the person looks at the edge, so the broadcast view names the peer.
//
// Screenshots of each view go to artifacts/ (docs/screenshots/ with STARLING_UPDATE_SCREENSHOTS=1).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { artifactsDir, ffmpegBin, moqCliBin, repoRoot, spawnChild, startMediaStage, stopAllChildren } from "./harness.mjs";
import { fakeMediaArgs } from "./media-run.mjs";
import { canvasPicture } from "./page/picture.js";

const shots = process.env.STARLING_UPDATE_SCREENSHOTS === "1" ? join(repoRoot, "docs/screenshots") : artifactsDir;
const BROADCAST = "room/alice.hang";

/** Resolves once the status page's player has painted three different, non-blank pictures. */
function waitForPictures(page) {
  return page.waitForFunction(
    ({ source }) => {
      const canvasPicture = new Function(`return (${source})`)();
      const picture = canvasPicture(document.querySelector("#player canvas"));
      if (picture && picture.lit > 50) (window.__pictures ??= new Set()).add(picture.hash);
      return (window.__pictures?.size ?? 0) >= 3;
    },
    { source: canvasPicture.toString() },
    { polling: 200, timeout: 30000 },
  );
}

describe("the status page in headless Chromium", { timeout: 180000 }, () => {
  let origin;
  let edge;
  let site;
  let browser;

  before(async () => {
    const stage = await startMediaStage(fakeMediaArgs);
    ({ origin, edge, site, browser } = stage);
    if (stage.error) throw stage.error;
    mkdirSync(shots, { recursive: true });
  });

  after(async () => {
    await browser?.close();
    await site?.close();
    await stopAllChildren();
  });

  it("the committed player bundle is what scripts/build-web.sh builds", () => {
    execFileSync(join(repoRoot, "scripts/build-web.sh"), ["--check"], { stdio: "pipe" });
  });

  it("shows the relay's last minutes, a broadcast's view and plays it", async () => {
    const publisher = await browser.context.newPage();
    const status = await browser.context.newPage();
    status.setDefaultTimeout(20000);
    const errors = [];
    status.on("pageerror", (err) => errors.push(err.message));
    try {
      const query = new URLSearchParams({ role: "publish", relay: origin.url, name: BROADCAST, transport: "webtransport" });
      await publisher.goto(`${site.url}media.html?${query}`);

      // The overview: six charts, drawn from the relay's own series.
      await status.goto(edge.url);
      await status.waitForFunction(() => document.querySelectorAll("#charts [data-chart]").length === 6);
      const history = await (await fetch(new URL("/history.json", edge.url))).json();
      assert.equal(history.interval_ms, 1000);
      assert.ok(history.points.length >= 1, "the relay keeps points");
      const times = history.points.map((p) => p.time_ms);
      assert.deepEqual(times, [...times].sort((a, b) => a - b), "points are in time order");
      // The broadcast arrives from the origin; its row offers Watch.
      const row = status.locator(`.broadcast[data-path="${BROADCAST}"]`);
      await row.waitFor();
      assert.match(await row.innerText(), /via cluster relay 1001/);
      await status.locator(`button.watch[data-path="${BROADCAST}"]`).waitFor();
      // The sessions chart has drawn a line over at least two points of the series.
      await status.waitForFunction(() => {
        const line = document.querySelector('[data-chart="Sessions and subscriptions"] polyline');
        return line && line.getAttribute("points").split(" ").length >= 2;
      });

      // The broadcast's view, by clicking its name.
      await row.locator("a.path").click();
      await status.locator("#broadcast-view").waitFor();
      assert.equal(await status.locator("#bv-path").innerText(), BROADCAST);
      assert.match(await status.locator("#bv-from").innerText(), /from cluster relay 1001, \d+ hops? from its publisher/);

      // Watch: the player the relay serves plays it through the edge.
      await status.locator("#bv-watch").click();
      await status.locator("#player moq-watch canvas").waitFor();
      // The picture changes: three different frames painted with something on them.
      await waitForPictures(status);
      // With the player subscribed, the view lists the tracks with their rates and subscribers.
      await status.waitForFunction(() => {
        const rows = [...document.querySelectorAll("#bv-tracks tbody tr")].map((tr) => tr.innerText);
        const video = rows.find((r) => r.startsWith("video"));
        const audio = rows.find((r) => r.startsWith("audio"));
        return video && audio && !/\t0 B\/s/.test(video);
      });
      const tracks = await status.locator("#bv-tracks").innerText();
      assert.match(tracks, /catalog\.json/);
      await status.screenshot({ path: join(shots, "status-broadcast.png"), fullPage: true });
      await status.locator("#player").screenshot({ path: join(shots, "status-player.png") });

      // Back to the overview: the player stops, and the charts show the media that moved.
      await status.locator(".crumbs a").click();
      await status.locator("#overview").waitFor();
      assert.equal(await status.locator("#player moq-watch").count(), 0, "the player stopped");
      await status.waitForFunction(() => {
        const line = document.querySelector('[data-chart="Bytes per second"] polyline');
        return line && line.getAttribute("points").split(" ").some((xy) => Number(xy.split(",")[1]) < 90);
      });
      await status.screenshot({ path: join(shots, "status-overview.png"), fullPage: true });
      assert.deepEqual(errors, [], "errors on the status page");
    } finally {
      await status.close();
      await publisher.close();
    }
  });
  it(
    "plays what ffmpeg publishes through moq-cli (H.264 and AAC, named without .hang)",
    { skip: moqCliBin && ffmpegBin ? false : "needs moq-cli (scripts/install-peers.sh) and ffmpeg (scripts/install-ffmpeg.sh)" },
    async () => {
      const broadcast = "demo";
      // The README's quick start: a test pattern with a tone, H.264 and AAC in MPEG-TS.
      const ffmpeg = spawnChild("ffmpeg", ffmpegBin, [
        "-hide_banner", "-loglevel", "error", "-re",
        "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-f", "lavfi", "-i", "sine=frequency=440",
        "-t", "60", "-c:v", "libx264", "-preset", "veryfast", "-tune", "zerolatency", "-g", "30", "-bf", "0",
        "-pix_fmt", "yuv420p", "-c:a", "aac", "-f", "mpegts", "-",
      ]);
      const moq = spawnChild("moq import", moqCliBin, ["--connect", origin.url, "import", "--broadcast", broadcast, "ts"]);
      ffmpeg.proc.stdout.pipe(moq.proc.stdin);
      const status = await browser.context.newPage();
      status.setDefaultTimeout(20000);
      try {
        await status.goto(edge.url);
        // Its catalog is found by the page's probe, so it gets a Watch button.
        await status.locator(`button.watch[data-path="${broadcast}"]`).click();
        await status.locator("#player moq-watch canvas").waitFor();
        await waitForPictures(status);
        await status.screenshot({ path: join(shots, "status-watch-moq-cli.png"), fullPage: true });
      } finally {
        await status.close();
        await moq.stop();
        await ffmpeg.stop();
      }
    },
  );
});
