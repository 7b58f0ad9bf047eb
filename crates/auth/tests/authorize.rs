//! `Claims::authorize`: overlap and rebasing of the root and the dialed path, and escapes refused.

use starling_auth::{AuthError, Claims, Patterns};

fn ps(texts: &[&str]) -> Patterns {
    texts.iter().map(|t| t.parse().unwrap()).collect()
}

fn claims(root: &str, subscribe: &[&str], publish: &[&str]) -> Claims {
    Claims {
        root: root.into(),
        subscribe: ps(subscribe),
        publish: ps(publish),
        ..Default::default()
    }
}

#[test]
fn path_equal_to_root() {
    let perms = claims("room/123", &["**"], &["alice/**"])
        .authorize("room/123")
        .unwrap();
    assert_eq!(perms.root(), "room/123");
    assert_eq!(perms.subscribe, ps(&["**"]));
    assert_eq!(perms.publish, ps(&["alice/**"]));
    assert!(perms.can_publish("alice"));
    assert!(perms.can_publish("alice/cam"));
    assert!(!perms.can_publish("bob"));
    assert!(perms.can_subscribe("bob/cam"));
}

#[test]
fn path_extending_root_narrows() {
    let perms = claims("room/123", &["bob/**"], &["alice/**"])
        .authorize("room/123/alice")
        .unwrap();
    assert_eq!(perms.root(), "room/123/alice");
    assert!(perms.subscribe.is_empty());
    assert_eq!(perms.publish, ps(&["**"]));
    let literal = claims("room", &[], &["alice"])
        .authorize("room/alice")
        .unwrap();
    assert_eq!(literal.publish, ps(&[""]));
    assert!(literal.can_publish(""));
    assert!(!literal.can_publish("x"));
}

#[test]
fn path_above_root_prepends() {
    let perms = claims("demo", &["**"], &["alice/**"])
        .authorize("/")
        .unwrap();
    assert_eq!(perms.root(), "");
    assert_eq!(perms.subscribe, ps(&["demo/**"]));
    assert_eq!(perms.publish, ps(&["demo/alice/**"]));
    assert!(perms.can_publish("demo/alice/x"));
    assert!(!perms.can_publish("alice"));
}

#[test]
fn empty_root_and_implicit_slashes() {
    let perms = claims("", &["demo/**"], &[])
        .authorize("demo/room")
        .unwrap();
    assert_eq!(perms.subscribe, ps(&["**"]));
    let perms = claims("/room/123/", &["bob/**"], &[])
        .authorize("//room/123//")
        .unwrap();
    assert_eq!(perms.subscribe, ps(&["bob/**"]));
}

#[test]
fn segment_boundaries_are_respected() {
    let c = claims("room", &["**"], &["**"]);
    assert!(matches!(
        c.authorize("roomy"),
        Err(AuthError::RootMismatch { .. })
    ));
    assert!(matches!(
        c.authorize("other"),
        Err(AuthError::RootMismatch { .. })
    ));
    let perms = c.authorize("room").unwrap();
    assert!(perms.can_subscribe("x"));
    let from_top = c.authorize("").unwrap();
    assert!(from_top.can_subscribe("room/x"));
    assert!(!from_top.can_subscribe("roomy/x"));
    assert!(!from_top.can_subscribe("roomy"));
}

#[test]
fn no_access_when_overlapping_but_empty() {
    let c = claims("", &["demo/**"], &[]);
    assert!(matches!(c.authorize("other"), Err(AuthError::NoAccess(_))));
}

#[test]
fn wildcards_rebase_as_a_set() {
    let perms = claims("", &["**/chat"], &[]).authorize("chat").unwrap();
    assert_eq!(perms.subscribe, ps(&["", "**/chat"]));
}

#[test]
fn dot_segments_and_encoded_separators_cannot_escape() {
    let c = claims("room", &["**"], &["**"]);
    for path in [
        "room/../other",
        "room/./x",
        "room/..",
        "room%2F..%2Fother",
        "room%2fother",
        "room/%2e%2e/other",
        "room\\..\\other",
    ] {
        assert!(
            matches!(c.authorize(path), Err(AuthError::InvalidPath(_))),
            "{path} must be refused"
        );
    }
    // A root is held to the same rule.
    let sneaky = claims("room/../admin", &["**"], &[]);
    assert!(matches!(
        sneaky.authorize(""),
        Err(AuthError::InvalidPath(_))
    ));
    // Inside a session, such paths are never granted either.
    let perms = c.authorize("room").unwrap();
    for path in ["../other", "a/../../other", "%2E%2E/x", "a%2Fb"] {
        assert!(!perms.can_publish(path), "{path}");
        assert!(!perms.can_subscribe(path), "{path}");
    }
    // An undecoded `%2F` is never a separator: `room%2Fother` is not under `room`.
    let from_top = claims("", &["room/**"], &[]).authorize("").unwrap();
    assert!(!from_top.can_subscribe("room%2Fother"));
}

#[test]
fn announce_interest_overlap() {
    let perms = claims("", &["room/*/chat"], &[]).authorize("").unwrap();
    assert!(perms.can_subscribe_under("room"));
    assert!(perms.can_subscribe_under(""));
    assert!(!perms.can_subscribe_under("other"));
}
