// The browser side of the Starling browser tests. Bundled with esbuild by the test harness
// (tests/browser/harness.mjs) and served next to index.html; the node tests drive it through
// `window.starling` with Playwright's page.evaluate.
//
// @moq/net 0.3.4 API used here:
//   Moq.Connection.connect(url, { webtransport, websocket, signal }) -> Established
//     .version ("moq-lite-05", ...), .transport ("webtransport" | "websocket"),
//     .announced(prefix?) -> Announce.Consumer (.next() -> { path, active }),
//     .consume(path) -> Broadcast.Consumer, .publish(path, Broadcast.Producer), .close()
//   Broadcast.Consumer.track(name).subscribe() -> Track.Subscriber (.recvGroup() -> Group.Consumer)
//   Group.Consumer.readString()
//   new Broadcast.Producer().createTrack(name) -> Track.Producer
//   Track.Producer.appendGroup() -> Group.Producer (.writeString(), .close())
//   Moq.Path.from(string)
import * as Moq from "@moq/net";

const logEl = () => document.getElementById("log");

function log(...args) {
  const line = args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ");
  console.log("[page]", line);
  const el = logEl();
  if (el) el.textContent += `${line}\n`;
}

// Rejects after `ms` unless `promise` settles first; `onTimeout` cleans up (closes a session).
function withDeadline(promise, ms, what, onTimeout) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => {
      try {
        onTimeout?.();
      } catch {
        // best effort
      }
      reject(new Error(`page: ${what} did not finish within ${ms} ms`));
    }, ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

async function fetchCertificateHash(relay) {
  const url = new URL("/certificate.sha256", relay);
  const res = await fetch(url, { cache: "no-store", signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`GET ${url} -> ${res.status}`);
  const hash = (await res.text()).trim();
  if (!/^[0-9a-f]{64}$/.test(hash)) throw new Error(`GET ${url} returned no SHA-256 hex: ${hash}`);
  return hash;
}

/**
 * Connects to the relay at `relay` (an http://host:port/ URL).
 *
 * transport "webtransport": fetches /certificate.sha256 itself, pins it through
 * `serverCertificateHashes`, dials https:// and disables the WebSocket fallback, so a broken
 * WebTransport path fails instead of silently falling back.
 *
 * transport "websocket": @moq/net has no "WebSocket only" option; it skips WebTransport when
 * the runtime has none (`isWebTransportSupported()` checks `globalThis.WebTransport`), so the
 * page hides the constructor for the duration of the connect and the library's own fallback
 * dials ws://host:port/ offering `qmux-0N.moq-lite-05` (and older) subprotocols at once.
 */
async function connect(options) {
  try {
    return await connectInner(options);
  } catch (err) {
    // Promise.any's AggregateError hides why each transport failed.
    if (err instanceof AggregateError) {
      throw new Error(`connect failed: ${err.errors.map((e) => String(e?.message ?? e)).join("; ")}`);
    }
    throw err;
  }
}

async function connectInner({ relay, transport, timeoutMs = 10000 }) {
  const signal = AbortSignal.timeout(timeoutMs);
  if (transport === "webtransport") {
    const certificateHash = await fetchCertificateHash(relay);
    const url = new URL(relay);
    url.protocol = "https:";
    const conn = await Moq.Connection.connect(url, {
      webtransport: { serverCertificateHashes: [{ algorithm: "sha-256", value: certificateHash }] },
      websocket: { enabled: false },
      signal,
    });
    log("connected", { url: url.toString(), version: conn.version, transport: conn.transport });
    return { conn, info: { version: conn.version, transport: conn.transport, certificateHash } };
  }
  if (transport === "websocket") {
    const saved = Object.getOwnPropertyDescriptor(globalThis, "WebTransport");
    globalThis.WebTransport = undefined;
    try {
      const conn = await Moq.Connection.connect(new URL(relay), { websocket: { enabled: true, delay: 0 }, signal });
      log("connected", { url: relay, version: conn.version, transport: conn.transport });
      return { conn, info: { version: conn.version, transport: conn.transport } };
    } finally {
      if (saved) Object.defineProperty(globalThis, "WebTransport", saved);
    }
  }
  throw new Error(`unknown transport ${transport}`);
}

async function waitAnnounced(conn, broadcast) {
  const announced = conn.announced();
  try {
    for (;;) {
      const event = await announced.next();
      if (!event) throw new Error(`announcements ended before ${broadcast} appeared`);
      log("announced", event);
      if (event.active && event.path === broadcast) return;
    }
  } finally {
    announced.close();
  }
}

/**
 * Connects, waits for `broadcast` to be announced, subscribes to `track` and returns the first
 * `count` frames that arrive (in arrival order, with their group and frame numbers).
 */
async function receive({ relay, transport, broadcast, track, count, timeoutMs = 20000 }) {
  let conn;
  const run = async () => {
    const connected = await connect({ relay, transport, timeoutMs });
    conn = connected.conn;
    await waitAnnounced(conn, broadcast);
    const consumer = conn.consume(Moq.Path.from(broadcast));
    const subscriber = consumer.track(track).subscribe();
    const frames = [];
    while (frames.length < count) {
      const group = await subscriber.recvGroup();
      if (!group) throw new Error(`track ${track} ended after ${frames.length} frames`);
      for (let index = 0; frames.length < count; index++) {
        const text = await group.readString();
        if (text === undefined) break;
        frames.push({ group: group.sequence, frame: index, text });
      }
    }
    log("received", frames);
    subscriber.close();
    consumer.close();
    return { info: connected.info, frames };
  };
  try {
    return await withDeadline(run(), timeoutMs, `receive ${broadcast}/${track}`, () => conn?.close());
  } finally {
    conn?.close();
  }
}

const publishers = new Map();
let nextPublisher = 1;

/**
 * Connects, publishes `broadcast` with one track `track`, and writes `${prefix}${n}` for
 * n = 1, 2, … as one frame per group every `intervalMs` until stopPublishing(id).
 */
async function startPublishing({ relay, transport, broadcast, track, prefix = "msg-", intervalMs = 50, timeoutMs = 10000 }) {
  let conn;
  const run = async () => {
    const connected = await connect({ relay, transport, timeoutMs });
    conn = connected.conn;
    const producer = new Moq.Broadcast.Producer();
    const trackProducer = producer.createTrack(track);
    conn.publish(Moq.Path.from(broadcast), producer);
    const id = nextPublisher++;
    const state = { conn, producer, trackProducer, written: 0, timer: undefined };
    const write = () => {
      state.written += 1;
      const group = trackProducer.appendGroup();
      group.writeString(`${prefix}${state.written}`);
      group.close();
    };
    write();
    state.timer = setInterval(write, intervalMs);
    publishers.set(id, state);
    log("publishing", { id, broadcast, track });
    return { id, info: connected.info };
  };
  try {
    return await withDeadline(run(), timeoutMs, `publish ${broadcast}`, () => conn?.close());
  } catch (err) {
    conn?.close();
    throw err;
  }
}

function stopPublishing(id) {
  const state = publishers.get(id);
  if (!state) return { written: 0 };
  publishers.delete(id);
  clearInterval(state.timer);
  state.trackProducer.close();
  state.producer.close();
  state.conn.close();
  return { written: state.written };
}

/** Attempts a connect and reports the outcome instead of throwing (for negative checks). */
async function tryConnect(options) {
  try {
    const { conn, info } = await connect(options);
    conn.close();
    return { ok: true, info };
  } catch (err) {
    return { ok: false, error: String(err?.message ?? err) };
  }
}

window.starling = { connect: tryConnect, receive, startPublishing, stopPublishing };
window.starlingReady = true;
log("ready");
