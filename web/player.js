// The status page's player: moq-dev's <moq-watch> web component and its <moq-watch-ui>
// controls. scripts/build-web.sh bundles this with esbuild into
// crates/relay/src/http/assets/player.js, which the relay embeds and serves at
// /assets/player.js; the status page imports it when a person presses Watch.
import "@moq/watch/element";
import "@moq/watch/ui";
