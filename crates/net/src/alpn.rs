//! Protocol identifiers (ALPNs / WebTransport protocols), the binding kinds, and how a protocol is picked.

/// ALPN and WebTransport protocol of moq-lite-06 (docs/wire.md §1.1).
pub const MOQ_LITE_06: &str = "moq-lite-06";
/// ALPN and WebTransport protocol of moq-lite-05 (docs/wire.md §1.1).
pub const MOQ_LITE_05: &str = "moq-lite-05";
/// The HTTP/3 ALPN, under which WebTransport runs. Servers offer it last.
pub const H3: &str = web_transport_quinn::ALPN;

/// The moq ALPNs Starling speaks, most preferred first.
pub const DEFAULT_ALPNS: &[&str] = &[MOQ_LITE_06, MOQ_LITE_05];

/// How a session reached us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    /// moq directly over QUIC; the ALPN is the moq version (`moqt://`, `moql://`).
    RawQuic,
    /// WebTransport over HTTP/3 (ALPN `h3`); the version rides `wt-protocol` (`https://`).
    WebTransport,
}

impl Binding {
    /// A short lowercase name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::RawQuic => "quic",
            Binding::WebTransport => "webtransport",
        }
    }
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The WebTransport protocol a server answers with: the first entry of the *client's*
/// `wt-available-protocols` list that the server supports (docs/wire.md §1.3), or `None`.
pub fn select_protocol<S: AsRef<str>>(offered: &[String], supported: &[S]) -> Option<String> {
    offered
        .iter()
        .find(|p| supported.iter().any(|s| s.as_ref() == p.as_str()))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_order_wins() {
        let offered = vec![MOQ_LITE_05.to_string(), MOQ_LITE_06.to_string()];
        assert_eq!(
            select_protocol(&offered, DEFAULT_ALPNS).as_deref(),
            Some(MOQ_LITE_05)
        );
        let offered = vec!["moq-00".to_string(), MOQ_LITE_06.to_string()];
        assert_eq!(
            select_protocol(&offered, DEFAULT_ALPNS).as_deref(),
            Some(MOQ_LITE_06)
        );
        assert_eq!(select_protocol(&["x".to_string()], DEFAULT_ALPNS), None);
        assert_eq!(select_protocol::<&str>(&[], DEFAULT_ALPNS), None);
    }
}
