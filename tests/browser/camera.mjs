// Publish your own camera and microphone to a relay from a browser page: serves the media
// test page (page/media.html, moq-dev's @moq/publish) on 127.0.0.1 and prints the address to
// open in Chrome or Chromium, which asks for the camera. Then press Watch on the relay's
// status page. Ctrl-C stops it.
//
//   scripts/install-browser.sh    # the npm packages (once)
//   node tests/browser/camera.mjs [RELAY_URL] [BROADCAST] [PORT]
//   (defaults: http://localhost:4443/, camera.hang, 8090)
import { startStaticServer } from "./harness.mjs";

const [relay = "http://localhost:4443/", name = "camera.hang", port = "8090"] = process.argv.slice(2);
const site = await startStaticServer(Number(port));
const query = new URLSearchParams({ role: "publish", relay, name, transport: "webtransport" });
console.log(`open ${site.url}media.html?${query}`);
console.log(`then watch it: ${new URL("/", relay)} (Watch beside ${name}), Ctrl-C to stop`);
