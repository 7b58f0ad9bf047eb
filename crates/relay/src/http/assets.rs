//! `GET /assets/player.js`: the status page's player, moq-dev's `@moq/watch` bundled by
//! `scripts/build-web.sh` and embedded in the binary, so the page plays a broadcast with no
//! CDN and no files beside the relay. The page imports it only when a person presses Watch.

use axum::http::header;
use axum::response::IntoResponse;

const PLAYER: &str = include_str!("../../assets/player.js");

pub(crate) async fn player() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            // The bundle changes only with the binary; a day's cache, revalidated after.
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        PLAYER,
    )
}
