// A person's path through Starling: moq-dev's @moq/publish 0.2.17 publishes Chromium's fake
// camera and microphone, @moq/watch 0.4.6 plays it in a second page, and the test checks the
// media itself: every video and audio chunk the player decoded is byte for byte one the
// publisher encoded, in order, from a keyframe (media-check.mjs); the decoder produced
// pictures; the canvas changed; the painted frames carry capture timestamps, from which the
// capture-to-render latency is reported (the figures in docs/benchmarks.md come from
// latency.mjs, which runs the same pair repeatedly beside moq-relay).
//
// Over WebTransport and over the WebSocket (QMux) fallback, through one relay and through two
// relays of a cluster.
//
// Run: cargo build -p starling && scripts/install-browser.sh && node --test tests/browser/*.test.mjs
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startMediaStage, stopAllChildren } from "./harness.mjs";
import { fakeMediaArgs, publishAndWatch } from "./media-run.mjs";

describe("@moq/publish -> Starling -> @moq/watch in headless Chromium", { timeout: 240000 }, () => {
  let origin;
  let edge;
  let site;
  let browser;

  before(async () => {
    const stage = await startMediaStage(fakeMediaArgs);
    ({ origin, edge, site, browser } = stage);
    if (stage.error) throw stage.error;
  });

  after(async () => {
    await browser?.close();
    await site?.close();
    await stopAllChildren();
  });

  function report(label, result) {
    const { video, audio, p50, p99, latencies } = result;
    console.error(
      `${label}: video ${video.matched} chunks (${video.skipped} groups skipped), audio ${audio.matched} chunks ` +
        `(${audio.skipped} skipped), player discarded ${JSON.stringify(result.watched.discarded)}, ` +
        `${result.watched.pictures} pictures decoded, capture-to-render p50 ${p50.toFixed(1)} ms p99 ${p99.toFixed(1)} ms over ${latencies.length} frames`,
    );
  }

  function assertPlayed(result, transport) {
    const { watched, published, video, audio, latencies, defects } = result;
    assert.deepEqual(defects, [], "the media the player decoded differs from what was published");
    assert.equal(published.connected, transport, "the transport the publisher connected over");
    assert.equal(watched.connected, transport, "the transport the player connected over");
    assert.deepEqual(watched.errors, [], "errors on the player's page");
    assert.deepEqual(published.errors, [], "errors on the publisher's page");
    assert.ok(video.matched >= 60, `video chunks compared: ${video.matched}`);
    assert.ok(audio.matched >= 40, `audio chunks compared: ${audio.matched}`);
    // Every chunk given to the decoder came out as a picture, but the last few may still be
    // in the decoder when the page is read.
    assert.ok(watched.pictures >= video.matched - 5, `pictures ${watched.pictures} for ${video.matched} chunks`);
    assert.ok(watched.pictureHashes.length >= 3, "the canvas changed");
    // The relay reported its round trip (PROBE), so the player did not fall back to its
    // 100 ms default buffer.
    assert.ok(typeof watched.peerRtt === "number", `the player's RTT from the relay: ${watched.peerRtt}`);
    // The latencies are capture-to-render times on one clock. Each run's share one offset:
    // @moq/publish stamps frames from the moment its page handled the first one, which on a
    // loaded machine can be 100 ms or more after its capture, so a latency may even read
    // negative; on different clocks they would be off by the pages' start times or more.
    assert.ok(latencies.every((ms) => ms > -1000 && ms < 10000), `latencies ${latencies.slice(0, 10)}`);
  }

  for (const transport of ["webtransport", "websocket"]) {
    it(`through one relay over ${transport}`, async () => {
      const result = await publishAndWatch(browser, site, {
        publishUrl: origin.url,
        watchUrl: origin.url,
        name: `camera-one-${transport}.hang`,
        transport,
      });
      report(`one relay, ${transport}`, result);
      assertPlayed(result, transport);
    });

    it(`through two relays of a cluster over ${transport}`, async () => {
      const result = await publishAndWatch(browser, site, {
        publishUrl: origin.url,
        watchUrl: edge.url,
        name: `camera-two-${transport}.hang`,
        transport,
      });
      report(`two relays, ${transport}`, result);
      assertPlayed(result, transport);
    });
  }
});
