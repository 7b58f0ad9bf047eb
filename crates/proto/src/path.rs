//! Normalized broadcast paths, `Path(s)` on the wire (docs/wire.md §2, §4.4).
//!
//! A path is a `/`-separated list of non-empty segments: leading and trailing `/` are
//! trimmed and `//` collapses, on construction and on decode. At most
//! [`MAX_PATH_SEGMENTS`] segments and [`MAX_PATH_BYTES`] bytes (after normalization).
//! Prefix matching is by whole segments: `room` covers `room/a`, never `roomy`.

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::coding::{self, DecodeError, EncodeError};
use crate::limits::{MAX_PATH_BYTES, MAX_PATH_SEGMENTS};
use crate::version::Version;

/// A normalized broadcast path; cheap to clone (an `Arc<str>` inside).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Path(Arc<str>);

/// A string that cannot become a [`Path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path has {count} segments, more than {MAX_PATH_SEGMENTS}")]
    TooManySegments { count: usize },
    #[error("path is {len} bytes, more than {MAX_PATH_BYTES}")]
    TooLong { len: usize },
}

impl From<PathError> for DecodeError {
    fn from(e: PathError) -> Self {
        match e {
            PathError::TooManySegments { .. } => DecodeError::BoundsExceeded("path segments"),
            PathError::TooLong { .. } => DecodeError::BoundsExceeded("path length"),
        }
    }
}

impl From<PathError> for EncodeError {
    fn from(e: PathError) -> Self {
        match e {
            PathError::TooManySegments { .. } => EncodeError::BoundsExceeded("path segments"),
            PathError::TooLong { .. } => EncodeError::BoundsExceeded("path length"),
        }
    }
}

impl Path {
    /// Normalize `s` into a path: trim leading/trailing `/`, collapse `//`.
    pub fn new(s: &str) -> Result<Path, PathError> {
        let trimmed = s.trim_matches('/');
        if trimmed.contains("//") {
            let joined = trimmed
                .split('/')
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join("/");
            Self::checked(&joined)
        } else {
            Self::checked(trimmed)
        }
    }

    /// Build from an already-normalized string, enforcing the bounds.
    fn checked(normalized: &str) -> Result<Path, PathError> {
        if normalized.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong {
                len: normalized.len(),
            });
        }
        let count = count_segments(normalized);
        if count > MAX_PATH_SEGMENTS {
            return Err(PathError::TooManySegments { count });
        }
        Ok(Path(Arc::from(normalized)))
    }

    /// The empty path (zero segments); a prefix of every path.
    pub fn empty() -> Path {
        Path(Arc::from(""))
    }

    /// The normalized string, without leading or trailing `/`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the empty path.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The segments, in order (none for the empty path).
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &str> + '_ {
        self.0.split('/').filter(|s| !s.is_empty())
    }

    /// Number of segments.
    pub fn len_segments(&self) -> usize {
        count_segments(&self.0)
    }

    /// `self/other`; either side empty yields the other. Fails if the result is too big.
    pub fn join(&self, other: &Path) -> Result<Path, PathError> {
        if self.is_empty() {
            Ok(other.clone())
        } else if other.is_empty() {
            Ok(self.clone())
        } else {
            Self::checked(&format!("{}/{}", self.0, other.0))
        }
    }

    /// Whether `prefix` is a whole-segment prefix of `self` (or equal). The empty prefix
    /// covers everything.
    pub fn has_prefix(&self, prefix: &Path) -> bool {
        self.prefix_end(prefix).is_some()
    }

    /// The remainder after a whole-segment `prefix`, or `None` if `prefix` does not cover
    /// `self`. `prefix.join(&rest) == self` whenever this returns `Some(rest)`.
    pub fn strip_prefix(&self, prefix: &Path) -> Option<Path> {
        let start = self.prefix_end(prefix)?;
        if start == 0 {
            return Some(self.clone());
        }
        Some(Path(Arc::from(&self.0[start..])))
    }

    /// Byte offset where the remainder after `prefix` starts, if `prefix` covers `self`.
    fn prefix_end(&self, prefix: &Path) -> Option<usize> {
        if prefix.is_empty() {
            return Some(0);
        }
        let rest = self.0.strip_prefix(&*prefix.0)?;
        if rest.is_empty() {
            Some(self.0.len())
        } else if rest.starts_with('/') {
            Some(prefix.0.len() + 1)
        } else {
            None
        }
    }

    /// The path without its last segment; `None` for the empty path.
    pub fn parent(&self) -> Option<Path> {
        if self.is_empty() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(i) => Path(Arc::from(&self.0[..i])),
            None => Path::empty(),
        })
    }

    /// `self`, its parent, …, ending with the empty path.
    pub fn ancestors(&self) -> impl Iterator<Item = Path> {
        std::iter::successors(Some(self.clone()), Path::parent)
    }

    /// Read a `Path(s)` field, normalizing it.
    pub fn decode(r: &mut &[u8], version: Version) -> Result<Path, DecodeError> {
        Ok(Path::new(coding::read_str(r, version)?)?)
    }

    /// Write a `Path(s)` field.
    pub fn encode(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        coding::write_str(w, &self.0, version)
    }
}

fn count_segments(normalized: &str) -> usize {
    if normalized.is_empty() {
        0
    } else {
        normalized.bytes().filter(|&b| b == b'/').count() + 1
    }
}

impl Default for Path {
    fn default() -> Self {
        Path::empty()
    }
}

impl fmt::Debug for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Path({:?})", &*self.0)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Path {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Path {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl FromStr for Path {
    type Err = PathError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Path::new(s)
    }
}

impl TryFrom<&str> for Path {
    type Error = PathError;

    fn try_from(s: &str) -> Result<Self, Self::Error> {
        Path::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Path {
        Path::new(s).unwrap()
    }

    #[test]
    fn normalizes() {
        assert_eq!(p("/a//b/").as_str(), "a/b");
        assert_eq!(p("///").as_str(), "");
        assert_eq!(p("a").len_segments(), 1);
        assert_eq!(p("").len_segments(), 0);
        assert_eq!(p("a/b/c").segments().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(p("a/b").to_string(), "a/b");
    }

    #[test]
    fn bounds() {
        let ok = vec!["x"; MAX_PATH_SEGMENTS].join("/");
        assert_eq!(p(&ok).len_segments(), MAX_PATH_SEGMENTS);
        let bad = vec!["x"; MAX_PATH_SEGMENTS + 1].join("/");
        assert_eq!(
            Path::new(&bad),
            Err(PathError::TooManySegments { count: 33 })
        );
        let long = "y".repeat(MAX_PATH_BYTES + 1);
        assert_eq!(
            Path::new(&long),
            Err(PathError::TooLong {
                len: MAX_PATH_BYTES + 1
            })
        );
        assert!(p(&ok).join(&p("z")).is_err());
    }

    #[test]
    fn prefixes() {
        assert!(p("room/a").has_prefix(&p("room")));
        assert!(p("room").has_prefix(&p("room")));
        assert!(!p("roomy").has_prefix(&p("room")));
        assert!(p("anything").has_prefix(&Path::empty()));
        assert!(!Path::empty().has_prefix(&p("a")));
        assert_eq!(p("room/a/b").strip_prefix(&p("room")), Some(p("a/b")));
        assert_eq!(p("room").strip_prefix(&p("room")), Some(Path::empty()));
        assert_eq!(p("roomy").strip_prefix(&p("room")), None);
        assert_eq!(p("demo").join(&p("clock")).unwrap(), p("demo/clock"));
    }

    #[test]
    fn ancestry() {
        assert_eq!(p("a/b/c").parent(), Some(p("a/b")));
        assert_eq!(p("a").parent(), Some(Path::empty()));
        assert_eq!(Path::empty().parent(), None);
        let all: Vec<String> = p("a/b/c").ancestors().map(|x| x.to_string()).collect();
        assert_eq!(all, ["a/b/c", "a/b", "a", ""]);
    }

    #[test]
    fn wire() {
        let mut r: &[u8] = b"\x06/a//b/";
        assert_eq!(Path::decode(&mut r, Version::Lite06).unwrap(), p("a/b"));
        let mut w = Vec::new();
        p("a/b").encode(&mut w, Version::Lite06).unwrap();
        assert_eq!(w, b"\x03a/b");
    }
}
