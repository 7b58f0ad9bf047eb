//! A union of patterns, reduced so that no member contains another, and rebasing a pattern
//! beneath a root, which yields such a union.

use crate::pattern::{split_path, InvalidPattern, Pattern, Segment};

/// A grant: a union of patterns in canonical order, with no member contained by another.
///
/// Containment is per member: a candidate only jointly covered by several members
/// (`a/**` against `a`, `a/*`, `a/*/**`) is not contained.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Patterns(Vec<Pattern>);

impl Patterns {
    /// The empty union, matching nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a pattern, dropping the members it contains; `false` when one already contains it.
    pub fn insert(&mut self, pattern: Pattern) -> bool {
        if self.contains(&pattern) {
            return false;
        }
        self.0.retain(|member| !pattern.contains(member));
        let at = self.0.partition_point(|member| member < &pattern);
        self.0.insert(at, pattern);
        true
    }

    /// Whether any member matches `path`.
    pub fn matches(&self, path: &str) -> bool {
        self.0.iter().any(|member| member.matches(path))
    }

    /// Whether some member contains `pattern`.
    pub fn contains(&self, pattern: &Pattern) -> bool {
        self.0.iter().any(|member| member.contains(pattern))
    }

    /// Whether every member of `other` is contained here.
    pub fn covers(&self, other: &Self) -> bool {
        other.0.iter().all(|pattern| self.contains(pattern))
    }

    /// Whether any member overlaps `pattern`.
    pub fn overlaps(&self, pattern: &Pattern) -> bool {
        self.0.iter().any(|member| member.overlaps(pattern))
    }

    /// Every member rebased at `root`, as one union.
    pub fn rebase(&self, root: &str) -> Self {
        self.0
            .iter()
            .flat_map(|member| member.rebase(root))
            .collect()
    }

    /// Every member placed beneath `root`.
    pub fn rooted(&self, root: &str) -> Result<Self, InvalidPattern> {
        self.0.iter().map(|member| member.rooted(root)).collect()
    }

    /// The members in canonical order.
    pub fn iter(&self) -> std::slice::Iter<'_, Pattern> {
        self.0.iter()
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing is granted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<Pattern> for Patterns {
    fn from_iter<I: IntoIterator<Item = Pattern>>(iter: I) -> Self {
        let mut set = Self::new();
        for pattern in iter {
            set.insert(pattern);
        }
        set
    }
}

impl From<Pattern> for Patterns {
    fn from(pattern: Pattern) -> Self {
        Self(vec![pattern])
    }
}

impl IntoIterator for Patterns {
    type Item = Pattern;
    type IntoIter = std::vec::IntoIter<Pattern>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Patterns {
    type Item = &'a Pattern;
    type IntoIter = std::slice::Iter<'a, Pattern>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl serde::Serialize for Patterns {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter())
    }
}

impl<'de> serde::Deserialize<'de> for Patterns {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Vec::<Pattern>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}

impl Pattern {
    /// The patterns that, relative to the literal `root`, match exactly the paths this one
    /// matches beneath `root`. Set-valued: `**/a` at `a` is both `` and `**/a`.
    pub fn rebase(&self, root: &str) -> Patterns {
        let root: Vec<&str> = split_path(root).collect();
        let mut out = Patterns::new();
        let matches_run = |segments: &[Segment], parts: &[&str]| {
            segments.iter().zip(parts).all(|(s, p)| s.matches(p))
        };
        let build = |segments: &[Segment]| {
            Pattern::new(segments.to_vec()).expect("a rebased pattern is valid")
        };
        match self.globstar {
            None => {
                if root.len() <= self.segments.len() && matches_run(&self.segments, &root) {
                    out.insert(build(&self.segments[root.len()..]));
                }
            }
            Some(index) => {
                let (head, tail) = self.split();
                if root.len() <= head.len() {
                    if matches_run(head, &root) {
                        out.insert(build(&self.segments[root.len()..]));
                    }
                    return out;
                }
                if !matches_run(head, &root) {
                    return out;
                }
                // The root reaches into the `**`: it either swallows the rest of the root,
                // or closed inside it with part of the tail matching the root's end.
                let rest = &root[head.len()..];
                out.insert(build(&self.segments[index..]));
                for consumed in 1..=tail.len().min(rest.len()) {
                    if matches_run(&tail[..consumed], &rest[rest.len() - consumed..]) {
                        out.insert(build(&tail[consumed..]));
                    }
                }
            }
        }
        out
    }
}
