//! `starling token generate|sign|verify` end to end, and against the reference `moq auth`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_starling");

/// A fresh scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("starling-token-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn starling(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn moq() -> PathBuf {
    let path = std::env::var_os("STARLING_MOQ_CLI")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap())
                .join(".cache/starling/moq-cli-0.14.10/bin/moq")
        });
    assert!(
        path.is_file(),
        "the reference moq CLI is missing at {}: run scripts/install-peers.sh (or set STARLING_MOQ_CLI)",
        path.display()
    );
    path
}

#[test]
fn generate_sign_verify() {
    let dir = Scratch::new("roundtrip");
    let key = dir.path("k.jwk");
    let public = dir.path("k.pub.jwk");
    ok(starling(
        &[
            "token",
            "generate",
            "--algorithm",
            "ES256",
            "--id",
            "relay-1",
            "--out",
            &key,
            "--public",
            &public,
        ],
        None,
    ));
    let token = ok(starling(
        &[
            "token",
            "sign",
            "--key",
            &key,
            "--root",
            "room",
            "--publish",
            "alice/**",
            "--subscribe",
            "*/chat",
            "--get",
            "public",
            "--expires-in",
            "3600",
        ],
        None,
    ));
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3);

    // From the argument, with the public key.
    let claims: serde_json::Value = serde_json::from_str(&ok(starling(
        &["token", "verify", "--key", &public, token],
        None,
    )))
    .unwrap();
    assert_eq!(claims["root"], "room");
    assert_eq!(claims["publish"], serde_json::json!(["alice/**"]));
    assert_eq!(
        claims["subscribe"],
        serde_json::json!(["*/chat", "public/**"])
    );
    assert!(claims["exp"].as_i64().unwrap() > claims["iat"].as_i64().unwrap());

    // From stdin, with a directory of keys.
    let keys = Scratch::new("dir");
    std::fs::copy(&public, keys.path("relay-1.jwk")).unwrap();
    ok(starling(
        &[
            "token",
            "generate",
            "--algorithm",
            "EdDSA",
            "--out",
            &keys.path("other.jwk"),
        ],
        None,
    ));
    let from_stdin = ok(starling(
        &["token", "verify", "--key", keys.0.to_str().unwrap()],
        Some(&format!("{token}\n")),
    ));
    assert!(from_stdin.contains("alice/**"));

    // Legacy-only grants are written as put/get.
    let legacy = ok(starling(
        &[
            "token", "sign", "--key", &key, "--put", "alice", "--get", "",
        ],
        None,
    ));
    let legacy_claims = ok(starling(
        &["token", "verify", "--key", &key, legacy.trim()],
        None,
    ));
    let legacy_claims: serde_json::Value = serde_json::from_str(&legacy_claims).unwrap();
    assert_eq!(legacy_claims["put"], serde_json::json!(["alice"]));
    assert_eq!(legacy_claims["get"], serde_json::json!([""]));

    // Generating to stdout prints the encoded key.
    let printed = ok(starling(
        &["token", "generate", "--algorithm", "HS256"],
        None,
    ));
    assert!(!printed.trim().is_empty() && !printed.contains('{'));
}

#[test]
fn verify_fails_loudly() {
    let dir = Scratch::new("refuse");
    let key = dir.path("k.jwk");
    let other = dir.path("o.jwk");
    ok(starling(
        &["token", "generate", "--algorithm", "HS256", "--out", &key],
        None,
    ));
    ok(starling(
        &["token", "generate", "--algorithm", "HS256", "--out", &other],
        None,
    ));
    let token = ok(starling(
        &["token", "sign", "--key", &key, "--subscribe", "**"],
        None,
    ));
    let token = token.trim().to_string();

    let wrong_key = starling(&["token", "verify", "--key", &other, &token], None);
    assert!(!wrong_key.status.success());
    assert!(String::from_utf8_lossy(&wrong_key.stderr).contains("no key with id"));

    let mut tampered = token.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    assert!(
        !starling(&["token", "verify", "--key", &key, &tampered], None)
            .status
            .success()
    );

    let expired = ok(starling(
        &[
            "token",
            "sign",
            "--key",
            &key,
            "--subscribe",
            "**",
            "--expires-in",
            "0",
        ],
        None,
    ));
    let out = starling(&["token", "verify", "--key", &key, expired.trim()], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expired"));

    // Granting nothing, or a bad pattern, is refused at signing.
    assert!(!starling(&["token", "sign", "--key", &key], None)
        .status
        .success());
    assert!(
        !starling(&["token", "sign", "--key", &key, "--publish", "/a"], None)
            .status
            .success()
    );
}

#[test]
fn interop_with_moq_auth() {
    let moq = moq();
    let dir = Scratch::new("interop");

    // moq generates and signs; Starling verifies.
    let moq_key = dir.path("moq.jwk");
    let run = |args: &[&str]| {
        let out = Command::new(&moq).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "moq {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    run(&[
        "auth",
        "generate",
        "--algorithm",
        "ES256",
        "--out",
        &moq_key,
    ]);
    let token = run(&[
        "auth",
        "sign",
        "--key",
        &moq_key,
        "--root",
        "room",
        "--publish",
        "alice/**",
    ]);
    let claims = ok(starling(
        &["token", "verify", "--key", &moq_key, token.trim()],
        None,
    ));
    assert!(claims.contains(r#""root": "room""#), "{claims}");

    // Starling generates and signs; moq verifies.
    let key = dir.path("starling.jwk");
    ok(starling(
        &["token", "generate", "--algorithm", "EdDSA", "--out", &key],
        None,
    ));
    let token = ok(starling(
        &[
            "token",
            "sign",
            "--key",
            &key,
            "--root",
            "room",
            "--subscribe",
            "*/chat",
        ],
        None,
    ));
    let token_file = dir.path("token");
    std::fs::write(&token_file, token.trim()).unwrap();
    let out = run(&["auth", "verify", "--key", &key, "--in", &token_file]);
    assert!(out.contains(r#"Pattern("*/chat")"#), "{out}");

    // Starling signs with moq's key; moq verifies.
    let token = ok(starling(
        &["token", "sign", "--key", &moq_key, "--put", "x"],
        None,
    ));
    std::fs::write(&token_file, token.trim()).unwrap();
    let out = run(&["auth", "verify", "--key", &moq_key, "--in", &token_file]);
    assert!(out.contains(r#"Pattern("x/**")"#), "{out}");
}
