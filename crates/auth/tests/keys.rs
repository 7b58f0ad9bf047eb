//! Key file formats (moq-cli's base64url JWK and plain JSON) and key sets chosen by `kid`.

use std::time::SystemTime;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use starling_auth::{Algorithm, AuthError, Claims, Key, KeySet, Patterns};

fn grant() -> Claims {
    Claims {
        root: "demo".into(),
        subscribe: ["**".parse().unwrap()].into_iter().collect::<Patterns>(),
        ..Default::default()
    }
}

/// A key exactly as `moq auth generate --algorithm ES256` wrote it (moq-cli 0.14.10).
const MOQ_ES256: &str = "eyJhbGciOiJFUzI1NiIsImtleV9vcHMiOlsic2lnbiIsInZlcmlmeSJdLCJrdHkiOiJFQyIsImNydiI6IlAtMjU2IiwieCI6IlhSYWJMN3BXRXY1akNvN2xuT2g2RGpiNmZPb1ZWaHZKNGNVMUU2NU9ZMVUiLCJ5IjoiRkVfcktBQ1BsOC0tLVpvMDFsbWJLWjlKZkgycW9jSV9QLTU3eHNmeGNxSSIsImQiOiJrTmVIekROazFTNEVqTU5Hakd4YmE5eWp1XzFOYk1UTXh6aEFxcHpBMGhjIiwia2lkIjoiMDJkZGVkNTVkNTY3YjlkMyJ9";

/// A token `moq auth sign --key <MOQ_ES256> --root room --publish 'alice/**' --subscribe '**'` printed.
const MOQ_TOKEN: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiIsImtpZCI6IjAyZGRlZDU1ZDU2N2I5ZDMifQ.eyJyb290Ijoicm9vbSIsInB1dCI6WyJhbGljZSJdLCJnZXQiOlsiIl19.BdIC5XAQN9bZ2V1qF3dO7f0A-xAJlH8RmR33RYo7FERde7lnqH6yXZhUpvYG_Eeuoj6lBrh_n3NiuR5jgWq5Yw";

#[test]
fn reads_a_recorded_moq_key_and_token() {
    let key = Key::parse(MOQ_ES256).unwrap();
    assert_eq!(key.algorithm(), Algorithm::ES256);
    assert_eq!(key.kid(), Some("02dded55d567b9d3"));
    let claims = key.verify(MOQ_TOKEN, SystemTime::now()).unwrap();
    assert_eq!(claims.root, "room");
    assert_eq!(
        claims
            .publish
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>(),
        ["alice/**"]
    );
    // The same key as plain JSON, with a trailing newline.
    let json = String::from_utf8(URL_SAFE_NO_PAD.decode(MOQ_ES256).unwrap()).unwrap();
    let plain = Key::parse(&format!("{json}\n")).unwrap();
    assert!(plain.verify(MOQ_TOKEN, SystemTime::now()).is_ok());
}

#[test]
fn writes_moq_cli_key_files() {
    let dir = tempfile::tempdir().unwrap();
    let key = Key::generate_with_id(Algorithm::ES256, Some("my-key_1".into())).unwrap();
    let file = dir.path().join("k.jwk");
    key.write_file(&file).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains('{') && !text.ends_with('\n') && !text.contains('='));
    let json: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&text).unwrap()).unwrap();
    assert_eq!(json["alg"], "ES256");
    assert_eq!(json["kty"], "EC");
    assert_eq!(json["crv"], "P-256");
    assert_eq!(json["kid"], "my-key_1");
    assert_eq!(json["key_ops"], serde_json::json!(["sign", "verify"]));
    for field in ["x", "y", "d"] {
        assert_eq!(
            URL_SAFE_NO_PAD
                .decode(json[field].as_str().unwrap())
                .unwrap()
                .len(),
            32
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let loaded = Key::from_file(&file).unwrap();
    let token = key.sign(&grant()).unwrap();
    assert_eq!(loaded.verify(&token, SystemTime::now()).unwrap(), grant());
}

#[test]
fn refuses_bad_keys() {
    for (json, why) in [
        (
            r#"{"kty":"oct","alg":"HS256","k":"AAAAAAAAAAAAAAAAAAAAAA"}"#,
            "short secret",
        ),
        (r#"{"kty":"oct","alg":"HS256"}"#, "no secret"),
        (
            r#"{"alg":"HS256","k":"Fp8kipWUJeUFqeSqWym_tRC_tyI8z-QpqopIGrbrD68"}"#,
            "no kty",
        ),
        (
            r#"{"kty":"oct","alg":"ES256","k":"Fp8kipWUJeUFqeSqWym_tRC_tyI8z-QpqopIGrbrD68"}"#,
            "alg/kty",
        ),
        (
            r#"{"kty":"oct","alg":"none","k":"Fp8kipWUJeUFqeSqWym_tRC_tyI8z-QpqopIGrbrD68"}"#,
            "alg none",
        ),
        (
            r#"{"kty":"oct","alg":"HS256","k":"Fp8kipWUJeUFqeSqWym_tRC_tyI8z-QpqopIGrbrD68","kid":"../x"}"#,
            "kid",
        ),
        ("not a key", "garbage"),
    ] {
        assert!(
            matches!(Key::parse(json), Err(AuthError::InvalidKey(_))),
            "{why}"
        );
    }
    // A P-256 key claiming ES384.
    let es256 = Key::generate(Algorithm::ES256).unwrap().to_json();
    assert!(Key::parse(&es256.replace("ES256", "ES384")).is_err());
    // `key_ops` is honoured.
    let verify_only = Key::generate(Algorithm::HS256)
        .unwrap()
        .to_json()
        .replace(r#"["sign","verify"]"#, r#"["verify"]"#);
    let verify_only = Key::parse(&verify_only).unwrap();
    assert!(matches!(
        verify_only.sign(&grant()),
        Err(AuthError::SignUnsupported)
    ));
    assert!(Key::generate(Algorithm::HS256)
        .unwrap()
        .to_public()
        .is_err());
}

#[test]
fn key_sets_select_by_kid() {
    let dir = tempfile::tempdir().unwrap();
    let a = Key::generate_with_id(Algorithm::ES256, Some("a".into())).unwrap();
    let b = Key::generate_with_id(Algorithm::EdDSA, Some("b".into())).unwrap();
    let stranger = Key::generate_with_id(Algorithm::ES256, Some("c".into())).unwrap();
    a.to_public()
        .unwrap()
        .write_file(dir.path().join("a.jwk"))
        .unwrap();
    b.write_file(dir.path().join("b.jwk")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();

    let set = KeySet::load(dir.path()).unwrap();
    assert_eq!(set.keys().len(), 2);
    let now = SystemTime::now();
    assert_eq!(
        set.verify(&a.sign(&grant()).unwrap(), now).unwrap(),
        grant()
    );
    assert_eq!(
        set.verify(&b.sign(&grant()).unwrap(), now).unwrap(),
        grant()
    );
    match set.verify(&stranger.sign(&grant()).unwrap(), now) {
        Err(AuthError::KeyNotFound(kid)) => assert_eq!(kid, "c"),
        other => panic!("{other:?}"),
    }
    // A token naming `a` but signed by another key with that id.
    let impostor = Key::generate_with_id(Algorithm::ES256, Some("a".into())).unwrap();
    assert!(matches!(
        set.verify(&impostor.sign(&grant()).unwrap(), now),
        Err(AuthError::BadSignature)
    ));

    // Without a kid: fine with one key, refused with several.
    let anonymous = Key::parse(&a.to_json().replace(r#","kid":"a""#, "")).unwrap();
    assert_eq!(anonymous.kid(), None);
    let token = anonymous.sign(&grant()).unwrap();
    assert!(matches!(
        set.verify(&token, now),
        Err(AuthError::MissingKid(2))
    ));
    let single = KeySet::load({
        let file = dir.path().join("single.key");
        a.write_file(&file).unwrap();
        file
    })
    .unwrap();
    assert_eq!(single.verify(&token, now).unwrap(), grant());

    // A key file in a directory without its own kid takes the file stem.
    let dir2 = tempfile::tempdir().unwrap();
    anonymous
        .write_file(dir2.path().join("stem-id.jwk"))
        .unwrap();
    let set2 = KeySet::load(dir2.path()).unwrap();
    assert_eq!(set2.keys()[0].kid(), Some("stem-id"));

    // A JWKS document.
    let jwks = format!(
        r#"{{"keys":[{},{}]}}"#,
        a.to_json(),
        b.to_public().unwrap().to_json()
    );
    let set3 = KeySet::parse(&jwks).unwrap();
    assert_eq!(
        set3.verify(&b.sign(&grant()).unwrap(), now).unwrap(),
        grant()
    );
}
