//! Request scoping: every API request is confined to a root, and its paths are resolved
//! against it the way moq-relay scopes an HTTP request (moq-auth `Claims::authorize`).
//!
//! The root is the request's grant (with authentication off, the configured HTTP root,
//! empty by default; see [`super::access`]). A requested path that extends the root is served; for a listing, a path that is
//! a parent of the root is served too, narrowed to what lies under the root; anything else
//! is outside the root: 401.

use starling_proto::Path;

use crate::http::error::HttpError;

/// The root one request is confined to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    root: Path,
}

/// Where a listing looks, and what its answers are relative to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// Paths under this prefix are listed.
    pub search: Path,
    /// Each listed path is written relative to this (the path the request named).
    pub base: Path,
}

impl Scope {
    pub fn new(root: Path) -> Self {
        Scope { root }
    }

    /// The root requests are confined to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The broadcast a `/fetch` names, which must lie under the root.
    pub fn broadcast(&self, requested: &str) -> Result<Path, HttpError> {
        let path = parse(requested)?;
        if path.has_prefix(&self.root) {
            Ok(path)
        } else {
            Err(HttpError::Unauthorized)
        }
    }

    /// What an `/announced/{prefix}` lists.
    pub fn listing(&self, requested: &str) -> Result<Listing, HttpError> {
        let base = parse(requested)?;
        if base.has_prefix(&self.root) {
            Ok(Listing {
                search: base.clone(),
                base,
            })
        } else if self.root.has_prefix(&base) {
            Ok(Listing {
                search: self.root.clone(),
                base,
            })
        } else {
            Err(HttpError::Unauthorized)
        }
    }
}

fn parse(requested: &str) -> Result<Path, HttpError> {
    Path::new(requested).map_err(|_| HttpError::BadRequest("invalid path"))
}

/// Whether `relative` (a path below the requested prefix) has a hidden segment, one starting
/// with `.`; moq-relay's `/announced` leaves those out (moq-net `Hidden`).
pub fn is_hidden(relative: &Path) -> bool {
    relative.segments().any(|segment| segment.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Path {
        Path::new(s).unwrap()
    }

    #[test]
    fn empty_root_admits_everything() {
        let scope = Scope::new(Path::empty());
        assert_eq!(scope.broadcast("room/a").unwrap(), p("room/a"));
        let listing = scope.listing("room").unwrap();
        assert_eq!((listing.search, listing.base), (p("room"), p("room")));
    }

    #[test]
    fn paths_outside_the_root_are_unauthorized() {
        let scope = Scope::new(p("room"));
        assert_eq!(scope.broadcast("roomy/a"), Err(HttpError::Unauthorized));
        assert_eq!(scope.broadcast("other/a"), Err(HttpError::Unauthorized));
        assert_eq!(scope.listing("roomy").unwrap_err(), HttpError::Unauthorized);
        assert_eq!(scope.broadcast("room/a").unwrap(), p("room/a"));
    }

    #[test]
    fn a_listing_above_the_root_is_narrowed_to_it() {
        let scope = Scope::new(p("org/room"));
        let listing = scope.listing("org").unwrap();
        assert_eq!((listing.search, listing.base), (p("org/room"), p("org")));
    }

    #[test]
    fn hidden_segments() {
        assert!(is_hidden(&p(".secret/a")));
        assert!(is_hidden(&p("a/.b")));
        assert!(!is_hidden(&p("a.b/c")));
    }
}
