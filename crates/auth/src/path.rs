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
    let lower = path.to_ascii_lowercase();
    ["%2f", "%5c", "%2e"]
        .iter()
        .any(|encoded| lower.contains(encoded))
}
