//! One path pattern in moq-pattern 0.1.3's language: literals, `*`, `pre*suf`, and one `**`.

use std::fmt;
use std::str::FromStr;

/// Why a string or a segment list is not a valid [`Pattern`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidPattern {
    /// A leading, trailing or doubled `/`.
    #[error("empty path segment")]
    EmptySegment,
    /// A literal holding `*` or `/`, a partial without prefix and suffix, or two `*` in one segment.
    #[error("invalid pattern segment: {0:?}")]
    InvalidSegment(String),
    /// More than one `**`.
    #[error("more than one ** segment")]
    MultipleGlobstars,
    /// More than [`Pattern::MAX_SEGMENTS`] segments.
    #[error("more than {} segments", Pattern::MAX_SEGMENTS)]
    TooManySegments,
}

/// One segment of a [`Pattern`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Segment {
    /// Exactly this segment: never empty, never holding `/` or `*`.
    Literal(String),
    /// `*`: any one segment.
    Wildcard,
    /// `prefix*suffix`: one segment starting with `prefix` and ending with `suffix`, not overlapping.
    Partial {
        /// What the segment starts with (may be empty).
        prefix: String,
        /// What the segment ends with (may be empty, not both).
        suffix: String,
    },
    /// `**`: any run of zero or more segments.
    Globstar,
}

impl Segment {
    fn parse(text: &str) -> Result<Self, InvalidPattern> {
        match text {
            "" => Err(InvalidPattern::EmptySegment),
            "*" => Ok(Self::Wildcard),
            "**" => Ok(Self::Globstar),
            _ if text.contains('/') => Err(InvalidPattern::InvalidSegment(text.to_string())),
            _ => match text.split_once('*') {
                None => Ok(Self::Literal(text.to_string())),
                Some((prefix, suffix)) if !suffix.contains('*') => Ok(Self::Partial {
                    prefix: prefix.to_string(),
                    suffix: suffix.to_string(),
                }),
                Some(_) => Err(InvalidPattern::InvalidSegment(text.to_string())),
            },
        }
    }

    /// Whether this segment matches one path segment (`**` is handled structurally).
    pub(crate) fn matches(&self, part: &str) -> bool {
        match self {
            Self::Literal(literal) => literal == part,
            Self::Wildcard => true,
            Self::Partial { prefix, suffix } => {
                part.len() >= prefix.len() + suffix.len()
                    && part.starts_with(prefix.as_str())
                    && part.ends_with(suffix.as_str())
            }
            Self::Globstar => false,
        }
    }

    /// Whether every segment `other` matches, this one matches too (`**` excluded).
    fn covers(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Wildcard, Self::Literal(_) | Self::Partial { .. } | Self::Wildcard) => true,
            (Self::Literal(a), Self::Literal(b)) => a == b,
            (Self::Partial { .. }, Self::Literal(literal)) => self.matches(literal),
            (
                Self::Partial { prefix, suffix },
                Self::Partial {
                    prefix: other_prefix,
                    suffix: other_suffix,
                },
            ) => {
                other_prefix.starts_with(prefix.as_str()) && other_suffix.ends_with(suffix.as_str())
            }
            _ => false,
        }
    }

    /// Whether some path segment matches both (`**` excluded).
    fn compatible(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Self::Partial { prefix, suffix },
                Self::Partial {
                    prefix: other_prefix,
                    suffix: other_suffix,
                },
            ) => {
                (prefix.starts_with(other_prefix.as_str())
                    || other_prefix.starts_with(prefix.as_str()))
                    && (suffix.ends_with(other_suffix.as_str())
                        || other_suffix.ends_with(suffix.as_str()))
            }
            _ => self.covers(other) || other.covers(self),
        }
    }
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Literal(literal) => f.write_str(literal),
            Self::Wildcard => f.write_str("*"),
            Self::Partial { prefix, suffix } => write!(f, "{prefix}*{suffix}"),
            Self::Globstar => f.write_str("**"),
        }
    }
}

/// A pattern over broadcast paths. Exact: `foo` matches only `foo`; `foo/**` is `foo` and
/// everything beneath; `**` is everything; the empty pattern is only the current root.
/// Equality and ordering are by canonical text (`*/**` is written `**/*`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    text: String,
    pub(crate) segments: Vec<Segment>,
    pub(crate) globstar: Option<usize>,
}

impl Pattern {
    /// The most segments a pattern may have, matching the wire's path limit.
    pub const MAX_SEGMENTS: usize = 32;

    /// A pattern from segments, validating the grammar and moving `**` before adjacent `*`.
    pub fn new(segments: impl IntoIterator<Item = Segment>) -> Result<Self, InvalidPattern> {
        let mut segments: Vec<Segment> = segments.into_iter().collect();
        if segments.len() > Self::MAX_SEGMENTS {
            return Err(InvalidPattern::TooManySegments);
        }
        let mut globstar = None;
        for (i, segment) in segments.iter().enumerate() {
            match segment {
                Segment::Literal(literal) if literal.is_empty() => {
                    return Err(InvalidPattern::EmptySegment)
                }
                Segment::Literal(literal) if literal.contains(['*', '/']) => {
                    return Err(InvalidPattern::InvalidSegment(literal.clone()))
                }
                Segment::Partial { prefix, suffix }
                    if (prefix.is_empty() && suffix.is_empty())
                        || prefix.contains(['*', '/'])
                        || suffix.contains(['*', '/']) =>
                {
                    return Err(InvalidPattern::InvalidSegment(format!("{prefix}*{suffix}")))
                }
                Segment::Globstar if globstar.is_some() => {
                    return Err(InvalidPattern::MultipleGlobstars)
                }
                Segment::Globstar => globstar = Some(i),
                _ => {}
            }
        }
        if let Some(mut index) = globstar {
            while index > 0 && segments[index - 1] == Segment::Wildcard {
                segments.swap(index - 1, index);
                index -= 1;
            }
            globstar = Some(index);
        }
        let text = segments
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("/");
        Ok(Self {
            text,
            segments,
            globstar,
        })
    }

    /// `**`: every path.
    pub fn all() -> Self {
        Self::new([Segment::Globstar]).expect("** is valid")
    }

    /// Exactly `path` (slashes trimmed and collapsed); fails when a segment holds `*`.
    pub fn literal(path: &str) -> Result<Self, InvalidPattern> {
        Self::new(literal_segments(path))
    }

    /// `path/**`: `path` and everything beneath it; the empty path gives `**`.
    pub fn subtree(path: &str) -> Result<Self, InvalidPattern> {
        let mut segments: Vec<Segment> = literal_segments(path).collect();
        if segments.len() < Self::MAX_SEGMENTS {
            segments.push(Segment::Globstar);
        }
        Self::new(segments)
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The segments, in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The covered prefix when this is literals followed by a final `**` (a legacy grant).
    pub fn as_prefix(&self) -> Option<String> {
        match self.segments.split_last() {
            Some((Segment::Globstar, head)) => head
                .iter()
                .map(|segment| match segment {
                    Segment::Literal(literal) => Some(literal.as_str()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(|parts| parts.join("/")),
            _ => None,
        }
    }

    /// Whether the path (slashes normalized) matches.
    pub fn matches(&self, path: &str) -> bool {
        let parts: Vec<&str> = split_path(path).collect();
        match self.globstar {
            None => {
                parts.len() == self.segments.len()
                    && self.segments.iter().zip(&parts).all(|(s, p)| s.matches(p))
            }
            Some(_) => {
                let (head, tail) = self.split();
                parts.len() >= head.len() + tail.len()
                    && head.iter().zip(&parts).all(|(s, p)| s.matches(p))
                    && tail
                        .iter()
                        .rev()
                        .zip(parts.iter().rev())
                        .all(|(s, p)| s.matches(p))
            }
        }
    }

    /// Whether every path `other` matches, this one matches too.
    pub fn contains(&self, other: &Self) -> bool {
        match (self.globstar, other.globstar) {
            (None, None) => {
                self.segments.len() == other.segments.len()
                    && self
                        .segments
                        .iter()
                        .zip(&other.segments)
                        .all(|(a, b)| a.covers(b))
            }
            (None, Some(_)) => false,
            (Some(_), None) => {
                let (head, tail) = self.split();
                other.segments.len() >= head.len() + tail.len()
                    && head.iter().zip(&other.segments).all(|(a, b)| a.covers(b))
                    && tail
                        .iter()
                        .rev()
                        .zip(other.segments.iter().rev())
                        .all(|(a, b)| a.covers(b))
            }
            (Some(_), Some(_)) => {
                let (head, tail) = self.split();
                let (other_head, other_tail) = other.split();
                // Our segments reaching past the other's head or tail face its open `**`,
                // so they must be `*`.
                let covers_run = |ours: &mut dyn Iterator<Item = &Segment>, theirs: &[&Segment]| {
                    ours.enumerate().all(|(i, a)| match theirs.get(i) {
                        Some(b) => a.covers(b),
                        None => *a == Segment::Wildcard,
                    })
                };
                let other_head: Vec<&Segment> = other_head.iter().collect();
                let other_tail: Vec<&Segment> = other_tail.iter().rev().collect();
                head.len() + tail.len() <= other_head.len() + other_tail.len()
                    && covers_run(&mut head.iter(), &other_head)
                    && covers_run(&mut tail.iter().rev(), &other_tail)
            }
        }
    }

    /// Whether some path matches both patterns.
    pub fn overlaps(&self, other: &Self) -> bool {
        let run = |a: &[Segment], b: &[Segment]| a.iter().zip(b).all(|(a, b)| a.compatible(b));
        let tail_run = |a: &[Segment], b: &[Segment]| {
            a.iter()
                .rev()
                .zip(b.iter().rev())
                .all(|(a, b)| a.compatible(b))
        };
        match (self.globstar, other.globstar) {
            (None, None) => {
                self.segments.len() == other.segments.len() && run(&self.segments, &other.segments)
            }
            (None, Some(_)) => other.overlaps(self),
            (Some(_), None) => {
                let (head, tail) = self.split();
                other.segments.len() >= head.len() + tail.len()
                    && run(head, &other.segments)
                    && tail_run(tail, &other.segments)
            }
            (Some(_), Some(_)) => {
                let (head, tail) = self.split();
                let (other_head, other_tail) = other.split();
                run(head, other_head) && tail_run(tail, other_tail)
            }
        }
    }

    /// This pattern placed beneath the literal `root`; the inverse of [`rebase`](Self::rebase) (in
    /// `patterns`, since a rebased pattern is a union).
    pub fn rooted(&self, root: &str) -> Result<Self, InvalidPattern> {
        Self::new(literal_segments(root).chain(self.segments.iter().cloned()))
    }

    pub(crate) fn split(&self) -> (&[Segment], &[Segment]) {
        match self.globstar {
            Some(index) => (&self.segments[..index], &self.segments[index + 1..]),
            None => (&self.segments, &[]),
        }
    }
}

pub(crate) fn split_path(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|part| !part.is_empty())
}

fn literal_segments(path: &str) -> impl Iterator<Item = Segment> + '_ {
    split_path(path).map(|part| Segment::Literal(part.to_string()))
}

impl FromStr for Pattern {
    type Err = InvalidPattern;

    /// Parse canonical text; unlike a path, stray slashes are errors, not normalized.
    fn from_str(text: &str) -> Result<Self, InvalidPattern> {
        if text.is_empty() {
            return Self::new([]);
        }
        text.split('/')
            .map(Segment::parse)
            .collect::<Result<Vec<_>, _>>()
            .and_then(Self::new)
    }
}

impl Default for Pattern {
    fn default() -> Self {
        Self::new([]).expect("the empty pattern is valid")
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({:?})", self.text)
    }
}

impl PartialOrd for Pattern {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pattern {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl serde::Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
