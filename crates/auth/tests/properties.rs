//! Property tests: containment and overlap agree with matching; rebase and rooted agree with joining.

use proptest::prelude::*;
use starling_auth::{Claims, Pattern, Patterns};

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "ab", "ba", "aa"]).prop_map(str::to_string),
        2 => Just("*".to_string()),
        2 => prop::sample::select(vec!["a*", "*a", "a*b", "b*"]).prop_map(str::to_string),
        2 => Just("**".to_string()),
    ]
}

fn pattern() -> impl Strategy<Value = Pattern> {
    prop::collection::vec(segment(), 0..5)
        .prop_filter_map("one ** at most", |segments| segments.join("/").parse().ok())
}

fn path() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::sample::select(vec!["a", "b", "ab", "ba", "aa", "aba"]).prop_map(str::to_string),
        0..6,
    )
}

fn join(a: &[String], b: &[String]) -> String {
    a.iter().chain(b).cloned().collect::<Vec<_>>().join("/")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn containment_is_sound(a in pattern(), b in pattern(), path in path()) {
        let path = path.join("/");
        if a.contains(&b) && b.matches(&path) {
            prop_assert!(a.matches(&path), "{a} contains {b} but not {path}");
        }
        if a.matches(&path) && b.matches(&path) {
            prop_assert!(a.overlaps(&b), "{a} and {b} both match {path}");
        }
    }

    #[test]
    fn a_pattern_contains_itself_and_reparses(a in pattern()) {
        prop_assert!(a.contains(&a));
        prop_assert_eq!(a.as_str().parse::<Pattern>().unwrap(), a);
    }

    #[test]
    fn rebase_agrees_with_joining(a in pattern(), root in path(), rest in path()) {
        let rebased = a.rebase(&root.join("/"));
        prop_assert_eq!(a.matches(&join(&root, &rest)), rebased.matches(&rest.join("/")));
    }

    #[test]
    fn rooted_agrees_with_joining(a in pattern(), root in path(), rest in path()) {
        let rooted = a.rooted(&root.join("/")).unwrap();
        prop_assert_eq!(rooted.matches(&join(&root, &rest)), a.matches(&rest.join("/")));
    }

    #[test]
    fn authorize_scopes_grants_to_the_path(
        grant in pattern(), root in path(), below in path(), rest in path(), above in 0usize..3,
    ) {
        let claims = Claims {
            root: root.join("/"),
            publish: Patterns::from(grant.clone()),
            ..Default::default()
        };
        // Dial below the root: what the session may publish at `rest` is what the grant
        // says at root/below/rest.
        if let Ok(permissions) = claims.authorize(&join(&root, &below)) {
            prop_assert_eq!(
                permissions.can_publish(&rest.join("/")),
                grant.matches(&join(&below, &rest))
            );
        }
        // Dial above the root: the root remainder is prepended.
        let cut = root.len().saturating_sub(above);
        if let Ok(permissions) = claims.authorize(&root[..cut].join("/")) {
            let remainder = &root[cut..];
            let full = join(remainder, &rest);
            prop_assert_eq!(
                permissions.can_publish(&full),
                grant.matches(&rest.join("/"))
            );
        }
    }
}
