//! Segment-aware literal paths: normalization, prefix stripping, and escape refusal.

/// Trim leading and trailing slashes and collapse doubled ones: `/a//b/` is `a/b`.
pub fn normalize(path: &str) -> String {
    path.split('/')
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

/// `path` without the segment-aligned `prefix` (and its `/`), or `None`; both normalized.
pub fn strip_prefix<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    if prefix.is_empty() {
        return Some(path);
    }
    let rest = path.strip_prefix(prefix)?;
    match rest.as_bytes().first() {
        None => Some(""),
        Some(b'/') => Some(&rest[1..]),
        Some(_) => None,
    }
}

/// Whether a path could be read as leaving where it points: a `.` or `..` segment, a
/// backslash, or a percent-encoded `/`, `\` or `.` (any case). Paths are compared as raw
/// bytes and never decoded, so refusing these keeps a caller that does decode from
/// escaping a root either.
pub fn is_suspicious(path: &str) -> bool {
    if path.contains('\\') {
        return true;
    }
    if path.split('/').any(|part| part == "." || part == "..") {
        return true;
    }
    // An encoded `/`, `\` or `.` in any case, without copying the path (listings check
    // every path they return).
    path.as_bytes().windows(3).any(|w| {
        w[0] == b'%'
            && matches!(
                (w[1], w[2].to_ascii_lowercase()),
                (b'2', b'f') | (b'5', b'c') | (b'2', b'e')
            )
    })
}
