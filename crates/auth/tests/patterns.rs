//! The pattern language: parsing, matching, containment, overlap, rebase and rooting.

use starling_auth::{InvalidPattern, Pattern, Patterns};

fn p(text: &str) -> Pattern {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn ps(texts: &[&str]) -> Patterns {
    texts.iter().map(|t| p(t)).collect()
}

#[test]
fn parse_is_canonical_and_strict() {
    assert_eq!(p("a/*/**").as_str(), "a/**/*");
    assert_eq!(p("").as_str(), "");
    assert_eq!(p("cam*.hang").to_string(), "cam*.hang");
    for bad in ["/a", "a/", "a//b", "a/**/b/**", "a**", "a*b*c", "**x"] {
        assert!(bad.parse::<Pattern>().is_err(), "{bad} should not parse");
    }
    assert_eq!(
        "a/**/b/**".parse::<Pattern>(),
        Err(InvalidPattern::MultipleGlobstars)
    );
    let deep = vec!["a"; 33].join("/");
    assert_eq!(
        deep.parse::<Pattern>(),
        Err(InvalidPattern::TooManySegments)
    );
    assert!(Pattern::literal("a/*").is_err());
    assert_eq!(Pattern::subtree("/a//b/").unwrap().as_str(), "a/b/**");
    assert_eq!(Pattern::subtree("").unwrap().as_str(), "**");
}

#[test]
fn matching_is_segment_aware() {
    let cases = [
        ("room", "room", true),
        ("room", "roomy", false),
        ("room/**", "room", true),
        ("room/**", "room/a/b", true),
        ("room/**", "roomy/a", false),
        ("**", "", true),
        ("", "", true),
        ("", "a", false),
        ("*", "a", true),
        ("*", "a/b", false),
        ("*.hang", "cam.hang", true),
        ("*.hang", ".hang", true),
        ("ab*ba", "aba", false),
        ("ab*ba", "abba", true),
        ("**/chat", "a/b/chat", true),
        ("**/chat", "chat", true),
        ("a/**/z", "a/z", true),
        ("a/**/z", "a/b/c/z", true),
        ("a/**/z", "a/b/c/y", false),
    ];
    for (pattern, path, expected) in cases {
        assert_eq!(p(pattern).matches(path), expected, "{pattern} ~ {path}");
    }
    // Paths are normalized, patterns are not.
    assert!(p("a/b").matches("/a//b/"));
}

#[test]
fn containment() {
    let cases = [
        ("**", "a/b", true),
        ("a/**", "a", true),
        ("a/**", "a/**", true),
        ("a/**", "ab/**", false),
        ("a", "a/**", false),
        ("*", "a", true),
        ("*", "**", false),
        ("**/*", "a/**", true),
        ("a/*/**", "a/**", false),
        ("*.hang", "cam*.hang", true),
        ("*.hang", "cam*hang", false),
        ("foo*", "foo.*.hang", true),
        ("foo.*", "foo*", false),
        ("**/*.hang", "pid/*/cam.hang", true),
    ];
    for (outer, inner, expected) in cases {
        assert_eq!(p(outer).contains(&p(inner)), expected, "{outer} ⊇ {inner}");
    }
}

#[test]
fn overlap_is_symmetric() {
    let cases = [
        ("a", "*", true),
        ("a/**", "**/b", true),
        ("a/**", "b/**", false),
        ("a/*", "*/b", true),
        ("*", "a/*/**", false),
        ("*.hang", "cam*", true),
        ("*.hang", "*.msf", false),
        ("a/**/b", "**/c", false),
    ];
    for (a, b, expected) in cases {
        assert_eq!(p(a).overlaps(&p(b)), expected, "{a} ∩ {b}");
        assert_eq!(p(b).overlaps(&p(a)), expected, "{b} ∩ {a}");
    }
}

#[test]
fn rebase_is_set_valued() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("**", "a", &["**"]),
        ("**/a", "a", &["", "**/a"]),
        ("a/**", "a/b", &["**"]),
        ("a/**", "b", &[]),
        ("a/b", "a", &["b"]),
        ("a/b", "a/b", &[""]),
        ("a/b", "a/b/c", &[]),
        ("*/b", "a", &["b"]),
        ("a/**/b/c", "a/b", &["**/b/c", "c"]),
        ("a/**/b", "a/b/b", &["**/b", ""]),
        ("*.hang/**", "cam.hang", &["**"]),
        ("*.hang/**", "cam.msf", &[]),
    ];
    for (text, root, expected) in cases {
        assert_eq!(p(text).rebase(root), ps(expected), "{text} at {root}");
    }
}

#[test]
fn rooted_inverts_rebase() {
    assert_eq!(p("**").rooted("a/b").unwrap(), p("a/b/**"));
    assert_eq!(p("").rooted("a").unwrap(), p("a"));
    assert!(p("a").rooted("*").is_err());
    assert!(p("b").rooted(&vec!["a"; 32].join("/")).is_err());
}

#[test]
fn unions_reduce_by_containment() {
    let mut set = Patterns::new();
    assert!(set.insert(p("a/b")));
    assert!(set.insert(p("a/*")));
    assert_eq!(set, ps(&["a/*"]));
    assert!(!set.insert(p("a/c")));
    assert!(set.insert(p("**")));
    assert_eq!(set, ps(&["**"]));
    // Joint coverage is not containment.
    let joint = ps(&["a", "a/*", "a/*/**"]);
    assert!(!joint.contains(&p("a/**")));
    assert!(joint.covers(&ps(&["a", "a/x/y"])));
    assert_eq!(
        serde_json::to_string(&ps(&["a/b", "a/*", "**/c"])).unwrap(),
        r#"["**/c","a/*"]"#
    );
}
