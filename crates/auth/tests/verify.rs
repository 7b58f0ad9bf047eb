//! Signing and verifying with every algorithm, and every way a token is refused.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use starling_auth::{Algorithm, AuthError, Claims, Key, Patterns, Scope};

fn ps(texts: &[&str]) -> Patterns {
    texts.iter().map(|t| t.parse().unwrap()).collect()
}

fn grant() -> Claims {
    Claims {
        root: "room".into(),
        publish: ps(&["alice/**"]),
        subscribe: ps(&["**"]),
        ..Default::default()
    }
}

fn b64(json: &str) -> String {
    URL_SAFE_NO_PAD.encode(json)
}

/// A token with these raw header and payload JSON, signed (correctly) by `key` when HMAC.
fn forge(header: &str, payload: &str, signature: &str) -> String {
    format!("{}.{}.{}", b64(header), b64(payload), signature)
}

fn hs256(secret: &[u8], header: &str, payload: &str) -> String {
    let signing_input = format!("{}.{}", b64(header), b64(payload));
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret);
    let tag = aws_lc_rs::hmac::sign(&key, signing_input.as_bytes());
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

const SECRET_KEY: &str =
    r#"{"kty":"oct","alg":"HS256","k":"Fp8kipWUJeUFqeSqWym_tRC_tyI8z-QpqopIGrbrD68","kid":"k1"}"#;

fn secret() -> Vec<u8> {
    URL_SAFE_NO_PAD
        .decode("Fp8kipWUJeUFqeSqWym_tRC_tyI8z-QpqopIGrbrD68")
        .unwrap()
}

fn now() -> SystemTime {
    SystemTime::now()
}

#[test]
fn every_algorithm_round_trips() {
    for alg in Algorithm::ALL {
        let key = Key::generate(alg).unwrap();
        let token = key.sign(&grant()).unwrap();
        let claims = key.verify(&token, now()).unwrap();
        assert_eq!(claims, grant(), "{alg}");
        // Through the file encoding too, and with the public half for asymmetric keys.
        let reloaded = Key::parse(&key.to_encoded()).unwrap();
        assert_eq!(reloaded.verify(&token, now()).unwrap(), grant(), "{alg}");
        if !alg.is_symmetric() {
            let public = key.to_public().unwrap();
            assert!(!public.is_private());
            assert_eq!(public.verify(&token, now()).unwrap(), grant(), "{alg}");
            assert!(matches!(
                public.sign(&grant()),
                Err(AuthError::SignUnsupported)
            ));
        }
    }
}

#[test]
fn expiry_and_not_before() {
    let key = Key::generate(Algorithm::ES256).unwrap();
    let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut claims = grant();
    claims.expires = Some(at);
    claims.not_before = Some(at - Duration::from_secs(60));
    claims.issued = Some(at - Duration::from_secs(60));
    let token = key.sign(&claims).unwrap();
    assert_eq!(
        key.verify(&token, at - Duration::from_secs(1)).unwrap(),
        claims
    );
    assert!(matches!(key.verify(&token, at), Err(AuthError::Expired)));
    assert!(matches!(
        key.verify(&token, at + Duration::from_secs(9)),
        Err(AuthError::Expired)
    ));
    assert!(matches!(
        key.verify(&token, at - Duration::from_secs(61)),
        Err(AuthError::NotYetValid)
    ));
}

#[test]
fn wrong_key_is_refused() {
    for alg in [
        Algorithm::HS256,
        Algorithm::ES256,
        Algorithm::EdDSA,
        Algorithm::RS256,
    ] {
        let key = Key::generate(alg).unwrap();
        let other = Key::generate(alg).unwrap();
        let token = key.sign(&grant()).unwrap();
        assert!(
            matches!(other.verify(&token, now()), Err(AuthError::BadSignature)),
            "{alg}"
        );
    }
}

#[test]
fn tampering_is_refused() {
    let key = Key::generate(Algorithm::ES256).unwrap();
    let token = key.sign(&grant()).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    // A widened payload under the original signature.
    let widened = b64(r#"{"root":"","put":[""],"get":[""]}"#);
    let tampered = format!("{}.{}.{}", parts[0], widened, parts[2]);
    assert!(matches!(
        key.verify(&tampered, now()),
        Err(AuthError::BadSignature)
    ));
    // A flipped signature byte.
    let mut sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    sig[5] ^= 1;
    let flipped = format!("{}.{}.{}", parts[0], parts[1], URL_SAFE_NO_PAD.encode(sig));
    assert!(matches!(
        key.verify(&flipped, now()),
        Err(AuthError::BadSignature)
    ));
    // Structural damage.
    for broken in [
        "",
        "abc",
        "a.b",
        "a.b.c.d",
        &format!("{}.{}", parts[0], parts[1]),
    ] {
        assert!(
            matches!(key.verify(broken, now()), Err(AuthError::MalformedToken(_))),
            "{broken:?}"
        );
    }
}

#[test]
fn alg_none_is_refused() {
    let key = Key::parse(SECRET_KEY).unwrap();
    let payload = r#"{"root":"","put":[""],"get":[""]}"#;
    for header in [
        r#"{"alg":"none","typ":"JWT"}"#,
        r#"{"alg":"None"}"#,
        r#"{"alg":"NONE","kid":"k1"}"#,
    ] {
        for signature in ["", "AAAA"] {
            let token = forge(header, payload, signature);
            assert!(
                matches!(key.verify(&token, now()), Err(AuthError::AlgNone)),
                "{header}"
            );
        }
    }
}

#[test]
fn algorithm_mismatch_is_refused() {
    // An HS256 token signed with the RSA public key bytes as the secret (the classic
    // confusion attack) must not verify against the RSA key.
    let rsa = Key::generate(Algorithm::RS256).unwrap();
    let public_json = rsa.to_public().unwrap().to_json();
    let token = hs256(
        public_json.as_bytes(),
        r#"{"alg":"HS256"}"#,
        r#"{"put":[""]}"#,
    );
    assert!(matches!(
        rsa.verify(&token, now()),
        Err(AuthError::AlgorithmMismatch {
            expected: Algorithm::RS256,
            ..
        })
    ));
    // HS384 header against an HS256 key.
    let key = Key::parse(SECRET_KEY).unwrap();
    let token = hs256(&secret(), r#"{"alg":"HS384"}"#, r#"{"put":[""]}"#);
    assert!(matches!(
        key.verify(&token, now()),
        Err(AuthError::AlgorithmMismatch { .. })
    ));
    // RS256 and PS256 share the key type but not the algorithm.
    let pss = Key::parse(&rsa.to_json().replace("RS256", "PS256")).unwrap();
    let token = rsa.sign(&grant()).unwrap();
    assert!(matches!(
        pss.verify(&token, now()),
        Err(AuthError::AlgorithmMismatch { .. })
    ));
    // A header without alg.
    let token = forge(r#"{"typ":"JWT"}"#, r#"{"put":[""]}"#, "AAAA");
    assert!(matches!(
        key.verify(&token, now()),
        Err(AuthError::MalformedToken(_))
    ));
}

#[test]
fn hand_made_hs256_token_verifies() {
    let key = Key::parse(SECRET_KEY).unwrap();
    let token = hs256(
        &secret(),
        r#"{"alg":"HS256","typ":"JWT"}"#,
        r#"{"root":"r","put":"a","get":["", "b"],"iss":"me","sub":"someone","jti":"j","iat":1}"#,
    );
    let claims = key.verify(&token, now()).unwrap();
    assert_eq!(claims.root, "r");
    assert_eq!(claims.publish, ps(&["a/**"]));
    assert_eq!(claims.subscribe, ps(&["**"]));
}

#[test]
fn unknown_and_malformed_claims_are_refused() {
    let key = Key::parse(SECRET_KEY).unwrap();
    let header = r#"{"alg":"HS256"}"#;
    for (payload, unknown) in [
        (r#"{"root":"r","put":[""],"aud":"relay"}"#, "aud"),
        (r#"{"root":"r","put":[""],"cluster":true}"#, "cluster"),
        (r#"{"roots":"r","put":[""]}"#, "roots"),
        (r#"{"publish":["a"],"Root":"x"}"#, "Root"),
    ] {
        let token = hs256(&secret(), header, payload);
        match key.verify(&token, now()) {
            Err(AuthError::UnknownClaim(name)) => assert_eq!(name, unknown),
            other => panic!("{payload}: {other:?}"),
        }
    }
    for payload in [
        r#"{"root":"r","publish":["a"],"get":["b"]}"#,
        r#"{"put":null,"publish":["a"]}"#,
        r#"{"publish":null,"subscribe":["a"]}"#,
        r#"{"put":["a/*"]}"#,
        r#"{"publish":["a/**/b/**"]}"#,
        r#"{"publish":["/a"]}"#,
        r#"{"root":5,"publish":["a"]}"#,
        r#"{"publish":["a"],"exp":"soon"}"#,
    ] {
        let token = hs256(&secret(), header, payload);
        assert!(
            matches!(key.verify(&token, now()), Err(AuthError::InvalidClaims(_))),
            "{payload}: {:?}",
            key.verify(&token, now())
        );
    }
    // Not an object at all (jsonwebtoken itself refuses it first).
    let token = hs256(&secret(), header, r#"["publish"]"#);
    assert!(key.verify(&token, now()).is_err());
    for payload in [r#"{"root":"r"}"#, r#"{"put":[],"get":[]}"#, r#"{}"#] {
        let token = hs256(&secret(), header, payload);
        assert!(
            matches!(key.verify(&token, now()), Err(AuthError::UselessToken)),
            "{payload}"
        );
    }
}

#[test]
fn claims_encode_legacy_only_when_faithful() {
    let subtrees = grant();
    assert_eq!(
        serde_json::to_string(&subtrees).unwrap(),
        r#"{"root":"room","put":["alice"],"get":[""]}"#
    );
    let mixed = Claims {
        root: "live".into(),
        publish: ps(&["camera1/**"]),
        subscribe: ps(&["*/chat"]),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_string(&mixed).unwrap(),
        r#"{"root":"live","publish":["camera1/**"],"subscribe":["*/chat"]}"#
    );
    let back: Claims = serde_json::from_str(&serde_json::to_string(&mixed).unwrap()).unwrap();
    assert_eq!(back, mixed);
}

#[test]
fn key_scope_caps_tokens() {
    let key = Key::generate(Algorithm::HS256).unwrap();
    let mut jwk = key.jwk().clone();
    jwk.scope = Some(Scope {
        root: "project".into(),
        publish: ps(&["live/**"]),
        subscribe: Patterns::new(),
    });
    let scoped = Key::from_jwk(jwk).unwrap();
    let inside = Claims {
        root: "project/live/room".into(),
        publish: ps(&["**"]),
        ..Default::default()
    };
    let token = scoped.sign(&inside).unwrap();
    assert_eq!(scoped.verify(&token, now()).unwrap(), inside);
    let sibling = Claims {
        root: "project/lively".into(),
        publish: ps(&["**"]),
        ..Default::default()
    };
    assert!(matches!(
        scoped.sign(&sibling),
        Err(AuthError::ScopeExceeded)
    ));
    // The unscoped twin signs it; the scoped key still refuses to verify it.
    let token = key.sign(&sibling).unwrap();
    assert!(matches!(
        scoped.verify(&token, now()),
        Err(AuthError::ScopeExceeded)
    ));
}
