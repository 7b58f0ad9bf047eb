// The media side of the browser tests: one page publishes the fake camera and microphone with
// @moq/publish's <moq-publish>, another plays it with @moq/watch's <moq-watch>. The node tests
// (media.test.mjs, latency.mjs) read what the page records through `window.media`.
//
// Query: ?role=publish|watch&relay=http://127.0.0.1:PORT/&name=BROADCAST&transport=webtransport|websocket
//
// What is recorded, bounded to the last MAX_RECORDS entries each:
// - publish: every chunk the page's VideoEncoder and AudioEncoder put out (timestamp in us,
//   keyframe, size, FNV-1a of the bytes), so the test knows exactly what was sent;
// - watch: every chunk handed to the page's VideoDecoder and AudioDecoder (the same fields and
//   `at`, when, on the epoch clock in ms),
//   the number of pictures the decoder produced, and each frame the renderer painted.
// The encoders and decoders run on the page's main thread, so wrapping the constructors
// before @moq/publish or @moq/watch creates them sees every chunk.
//
// Latency: @moq/publish stamps each video frame with its capture time on the publishing page's
// performance clock (microseconds); the player's renderer reports the timestamp (milliseconds)
// of each frame it paints. The two pages share the machine clock through
// performance.timeOrigin, so capture-to-render latency is
//   (watch.timeOrigin + now) - (publish.timeOrigin + timestamp).
import "@moq/publish/element";
import "@moq/watch/element";
import { canvasPicture } from "./picture.js";

const MAX_RECORDS = 20000;

const params = new URLSearchParams(location.search);
const role = params.get("role");
const relay = params.get("relay");
const name = params.get("name");

const state = {
  role,
  timeOrigin: performance.timeOrigin,
  transport: globalThis.WebTransport ? "webtransport" : "websocket",
  errors: [],
  // publish side
  encoded: { video: [], audio: [] },
  // watch side
  decoded: { video: [], audio: [] },
  pictures: 0,
  rendered: [], // { timestamp (ms, publisher clock), at (ms, epoch) }
  pictureHashes: [], // distinct canvas fingerprints, sampled every 10th painted frame
  videoFrames: 0,
  audioBytes: 0,
  audioTimestamps: 0,
};
window.media = state;
window.addEventListener("error", (e) => push(state.errors, String(e.message)));
window.addEventListener("unhandledrejection", (e) => push(state.errors, String(e.reason?.message ?? e.reason)));

const stage = document.getElementById("stage");

function push(list, entry) {
  list.push(entry);
  if (list.length > MAX_RECORDS) list.splice(0, list.length - MAX_RECORDS);
}

function fnv1a(bytes) {
  let h = 2166136261;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 16777619);
  return h >>> 0;
}

function describe(chunk) {
  const bytes = new Uint8Array(chunk.byteLength);
  chunk.copyTo(bytes);
  return { ts: chunk.timestamp, key: chunk.type === "key", size: chunk.byteLength, hash: fnv1a(bytes) };
}

/** Records every chunk an encoder class puts out. */
function tapEncoder(name, list) {
  const Original = globalThis[name];
  globalThis[name] = class extends Original {
    constructor(init) {
      super({
        ...init,
        output: (chunk, metadata) => {
          push(list, describe(chunk));
          init.output(chunk, metadata);
        },
      });
    }
  };
}

/** Records every chunk given to a decoder class, and (for video) every picture it returns. */
function tapDecoder(name, list, onOutput) {
  const Original = globalThis[name];
  globalThis[name] = class extends Original {
    constructor(init) {
      super({
        ...init,
        output: (output) => {
          onOutput?.();
          init.output(output);
        },
      });
    }
    decode(chunk) {
      push(list, { ...describe(chunk), at: performance.timeOrigin + performance.now() });
      return super.decode(chunk);
    }
  };
}

if (role === "publish") {
  tapEncoder("VideoEncoder", state.encoded.video);
  tapEncoder("AudioEncoder", state.encoded.audio);
  const el = document.createElement("moq-publish");
  el.setAttribute("url", relay);
  el.setAttribute("name", name);
  el.setAttribute("source", "camera");
  const video = document.createElement("video");
  video.muted = true;
  video.autoplay = true;
  el.appendChild(video);
  stage.appendChild(el);
  state.element = el;
} else if (role === "watch") {
  tapDecoder("VideoDecoder", state.decoded.video, () => {
    state.pictures += 1;
  });
  tapDecoder("AudioDecoder", state.decoded.audio);
  const el = document.createElement("moq-watch");
  el.setAttribute("url", relay);
  el.setAttribute("name", name);
  el.setAttribute("visible", "always");
  const canvas = document.createElement("canvas");
  canvas.width = 320;
  canvas.height = 240;
  el.appendChild(canvas);
  stage.appendChild(el);
  state.element = el;
  el.renderer.out.timestamp.subscribe((ts) => {
    if (ts === undefined) return;
    push(state.rendered, { timestamp: ts, at: performance.timeOrigin + performance.now() });
    if (state.rendered.length % 10 === 0) {
      // After this paint: the renderer draws the frame it just reported.
      requestAnimationFrame(() => {
        const hash = state.canvasHash();
        if (hash && !state.pictureHashes.includes(hash)) push(state.pictureHashes, hash);
      });
    }
  });
  el.video.out.stats.subscribe((s) => {
    if (s) state.videoFrames = s.frameCount;
  });
  el.audio.out.stats.subscribe((s) => {
    if (s) state.audioBytes = s.bytesReceived;
  });
  el.audio.out.timestamp.subscribe((ts) => {
    if (ts !== undefined) state.audioTimestamps += 1;
  });
}

/** The player's picture now (page/picture.js), as a string; "" before it has one. */
state.canvasHash = () => {
  const picture = canvasPicture(stage.querySelector("canvas"));
  return picture ? `${picture.hash.toString(16)}:${picture.lit}` : "";
};

window.mediaReady = true;
