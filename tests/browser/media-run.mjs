// One publish-and-watch run in Chromium: page/media.html as @moq/publish on one relay and as
// @moq/watch on another (or the same), until the player has painted enough frames; returns
// what both pages recorded and the capture-to-render latencies. Used by media.test.mjs and by
// the latency benchmark (latency.mjs).
import { evaluate, withTimeout } from "./harness.mjs";
import { compareChunks, percentile } from "./media-check.mjs";

/** Chromium flags for a fake camera and microphone that play without a gesture. */
export const fakeMediaArgs = [
  "--use-fake-device-for-media-stream",
  "--use-fake-ui-for-media-stream",
  "--autoplay-policy=no-user-gesture-required",
];

async function openMediaPage(browser, site, { role, relayUrl, name, transport, lines }) {
  const page = await browser.context.newPage();
  page.setDefaultTimeout(15000);
  page.on("console", (msg) => {
    const line = `${role}: ${msg.type()}: ${msg.text()}`;
    browser.console.push(line);
    lines.push(line);
  });
  page.on("pageerror", (err) => browser.console.push(`${role}: pageerror: ${err.message}`));
  const query = new URLSearchParams({ role, relay: relayUrl, name, transport });
  await page.goto(`${site.url}media.html?${query}`);
  await page.waitForFunction(() => window.mediaReady === true, null, { timeout: 10000 });
  return page;
}

/**
 * Publishes the fake camera at `publishUrl` and watches it at `watchUrl` until `frames`
 * frames were painted, `audio` audio chunks decoded and the picture changed three times.
 * `skipFrames` painted frames at the start are left out of the latencies (the player's
 * start-up).
 */
export async function publishAndWatch(browser, site, options) {
  const { publishUrl, watchUrl, name, transport, frames = 60, audio = 40, skipFrames = 10, timeoutMs = 40000 } = options;
  const lines = [];
  const publisher = await openMediaPage(browser, site, { role: "publish", relayUrl: publishUrl, name, transport, lines });
  let watcher;
  try {
    watcher = await openMediaPage(browser, site, { role: "watch", relayUrl: watchUrl, name, transport, lines });
    await withTimeout(
      watcher.waitForFunction(
        ({ frames, audio }) =>
          window.media.rendered.length >= frames &&
          window.media.decoded.audio.length >= audio &&
          window.media.pictureHashes.length >= 3,
        { frames: frames + skipFrames, audio },
        { timeout: timeoutMs, polling: 100 },
      ),
      timeoutMs + 5000,
      "the player painting frames",
    ).catch(async (err) => {
      const seen = await evaluate(watcher, () => ({
        rendered: window.media.rendered.length,
        decoded: window.media.decoded.video.length,
        audio: window.media.decoded.audio.length,
        pictures: window.media.pictureHashes.length,
        errors: window.media.errors,
      }), undefined, 5000, "reading the player").catch(() => undefined);
      err.message += `\nplayer: ${JSON.stringify(seen)}\n${browser.console.slice(-20).join("\n")}`;
      throw err;
    });
    // The player first, then the publisher: everything the player has was sent by then.
    const watched = await evaluate(watcher, () => {
      const m = window.media;
      return {
        transport: m.transport,
        timeOrigin: m.timeOrigin,
        decoded: m.decoded,
        pictures: m.pictures,
        rendered: m.rendered,
        pictureHashes: m.pictureHashes,
        errors: m.errors,
        // The relay's RTT as its PROBE reports gave it to the player (what sizes its buffer).
        peerRtt: m.element.connection.established.peek()?.probe?.peek()?.rtt,
      };
    }, undefined, 10000, "reading the player");
    const published = await evaluate(publisher, () => {
      const m = window.media;
      return { transport: m.transport, timeOrigin: m.timeOrigin, encoded: m.encoded, errors: m.errors };
    }, undefined, 10000, "reading the publisher");
    // @moq/net says which transport won the connect race.
    const connected = (role) => {
      const line = lines.find((l) => l.startsWith(`${role}: `) && / connected via (WebTransport|WebSocket)/.test(l));
      return line?.includes("WebTransport") ? "webtransport" : line ? "websocket" : undefined;
    };
    published.connected = connected("publish");
    watched.connected = connected("watch");
    watched.discarded = discardedGroups(lines.filter((l) => l.startsWith("watch: ")));
    const result = { published, watched, ...measure(published, watched, skipFrames) };
    if (result.defects.length > 0) {
      result.defects.push(`the pages said:\n${lines.filter((l) => !/: debug: /.test(l)).slice(-30).join("\n")}`);
    }
    return result;
  } finally {
    await Promise.all([publisher.close(), watcher?.close()].map((p) => p?.catch(() => {})));
  }
}

/**
 * Groups the player itself discarded, by track kind, from @moq/hang's consumer warnings:
 * "skipping old group" (it arrived after a newer one had started playing; groups travel on
 * streams of their own) and "skipping slow group" (buffered past the latency target). Each
 * names a group that did arrive; a group a relay lost never arrived and is named by none.
 */
export function discardedGroups(lines) {
  const discarded = { video: 0, audio: 0 };
  for (const line of lines) {
    const m = /skipping (?:old|slow) group: track=(video|audio)/.exec(line);
    if (m) discarded[m[1]] += 1;
  }
  return discarded;
}

/**
 * Checks the player against the publisher (every chunk, video and audio) and returns the
 * comparison, the defects found (`defects`: corrupted, reordered or lost media, empty when
 * the path was faithful) and the capture-to-render latencies (ms) of the frames painted after
 * the first `skipFrames`. Each painted frame must carry the timestamp of a frame the
 * publisher encoded, so the latency is measured from that frame's capture.
 */
export function measure(published, watched, skipFrames) {
  const defects = [];
  const compare = (kind) => {
    try {
      // Every audio chunk is a keyframe and a group of its own (@moq/publish 0.2.17).
      return compareChunks(published.encoded[kind], watched.decoded[kind], { what: kind });
    } catch (err) {
      defects.push(err.message);
      return { matched: watched.decoded[kind].length, skipped: 0 };
    }
  };
  const video = compare("video");
  const audio = compare("audio");
  // A whole group may be missing only when the player says it discarded one.
  const discarded = watched.discarded ?? { video: 0, audio: 0 };
  for (const [kind, got] of [["video", video], ["audio", audio]]) {
    got.lost = Math.max(0, got.skipped - discarded[kind]);
    if (got.lost > 0) {
      defects.push(`${kind}: ${got.skipped} group(s) missing but the player discarded only ${discarded[kind]}`);
    }
  }
  const captured = new Set(published.encoded.video.map((c) => c.ts));
  const latencies = [];
  for (const r of watched.rendered.slice(skipFrames)) {
    if (!captured.has(Math.round(r.timestamp * 1000))) {
      defects.push(`painted a frame at ${r.timestamp} ms that the publisher never encoded`);
      continue;
    }
    latencies.push(r.at - (published.timeOrigin + r.timestamp));
  }
  return {
    video,
    audio,
    defects,
    latencies,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}
