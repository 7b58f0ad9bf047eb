//! What a verified token lets one session do, relative to the session root.

use crate::patterns::Patterns;

/// The access a token grants at the dialed path, which becomes the session root.
///
/// Produced by [`Claims::authorize`](crate::Claims::authorize). Every pattern is relative
/// to [`root`](Self::root): `**` is the root and everything beneath, the empty pattern is
/// the root itself. The relay resolves wire paths against `root`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions {
    /// The session root: the normalized dialed path.
    pub root: String,
    /// Patterns the holder may publish, relative to `root`.
    pub publish: Patterns,
    /// Patterns the holder may subscribe to, relative to `root`.
    pub subscribe: Patterns,
}

impl Permissions {
    /// The session root every wire path is relative to.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// Whether the holder may publish the broadcast at `path` (relative to the root).
    pub fn can_publish(&self, path: &str) -> bool {
        !crate::path::is_suspicious(path) && self.publish.matches(path)
    }

    /// Whether the holder may subscribe to the broadcast at `path` (relative to the root).
    pub fn can_subscribe(&self, path: &str) -> bool {
        !crate::path::is_suspicious(path) && self.subscribe.matches(path)
    }

    /// Whether some broadcast under `prefix` (relative to the root) may be subscribed,
    /// which is when an announce interest there is worth serving.
    pub fn can_subscribe_under(&self, prefix: &str) -> bool {
        if crate::path::is_suspicious(prefix) {
            return false;
        }
        crate::Pattern::subtree(prefix).is_ok_and(|subtree| self.subscribe.overlaps(&subtree))
    }

    /// Whether nothing is granted.
    pub fn is_empty(&self) -> bool {
        self.publish.is_empty() && self.subscribe.is_empty()
    }
}
