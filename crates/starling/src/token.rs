//! `starling token generate|sign|verify`: keys and JWTs in moq-cli's formats.

use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::{Args, Subcommand};
use starling_auth::{Algorithm, Claims, Key, KeySet, Pattern, Patterns};

#[derive(Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Generate a key; writes base64url-encoded JWK JSON (moq-cli's key file format).
    Generate {
        /// HS256, HS384, HS512, ES256, ES384, RS256, RS384, RS512, PS256, PS384, PS512 or EdDSA.
        #[arg(long, default_value = "ES256")]
        algorithm: String,
        /// Key id (`[A-Za-z0-9_-]{1,128}`); random 16 hex digits when omitted.
        #[arg(long)]
        id: Option<String>,
        /// Write the key here (owner-only) instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write the verify-only public key here (asymmetric algorithms only).
        #[arg(long)]
        public: Option<PathBuf>,
    },
    /// Sign a token and print it.
    Sign {
        /// The signing key file (base64url or JSON JWK).
        #[arg(long)]
        key: PathBuf,
        /// The root the grants are relative to.
        #[arg(long, default_value = "")]
        root: String,
        /// Publish patterns (repeatable): `name`, `name/**`, `*/chat`, `**`.
        #[arg(long)]
        publish: Vec<String>,
        /// Subscribe patterns (repeatable).
        #[arg(long)]
        subscribe: Vec<String>,
        /// Legacy publish prefixes (repeatable): `p` grants `p/**`, `""` everything.
        #[arg(long)]
        put: Vec<String>,
        /// Legacy subscribe prefixes (repeatable).
        #[arg(long)]
        get: Vec<String>,
        /// Expire the token this many seconds from now.
        #[arg(long)]
        expires_in: Option<u64>,
    },
    /// Verify a token and print its claims as JSON; exits non-zero when it does not verify.
    Verify {
        /// A key file, a JWKS file, or a directory of `{kid}.jwk` files.
        #[arg(long)]
        key: PathBuf,
        /// The token; read from stdin when omitted.
        token: Option<String>,
    },
}

fn grants(patterns: &[String], prefixes: &[String]) -> anyhow::Result<Patterns> {
    let mut out = Patterns::new();
    for text in patterns {
        out.insert(text.parse().with_context(|| format!("pattern {text:?}"))?);
    }
    for prefix in prefixes {
        out.insert(Pattern::subtree(prefix).with_context(|| format!("prefix {prefix:?}"))?);
    }
    Ok(out)
}

pub fn run(args: TokenArgs) -> anyhow::Result<()> {
    match args.command {
        TokenCommand::Generate {
            algorithm,
            id,
            out,
            public,
        } => {
            let alg: Algorithm = algorithm.parse()?;
            let key = Key::generate_with_id(alg, id)?;
            match out {
                Some(path) => key
                    .write_file(&path)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => println!("{}", key.to_encoded()),
            }
            if let Some(path) = public {
                key.to_public()?
                    .write_file(&path)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        TokenCommand::Sign {
            key,
            root,
            publish,
            subscribe,
            put,
            get,
            expires_in,
        } => {
            let key = Key::from_file(&key).with_context(|| format!("loading {}", key.display()))?;
            let now = SystemTime::now();
            let claims = Claims {
                root,
                publish: grants(&publish, &put)?,
                subscribe: grants(&subscribe, &get)?,
                expires: expires_in.map(|secs| now + Duration::from_secs(secs)),
                issued: Some(now),
                not_before: None,
            };
            println!("{}", key.sign(&claims)?);
        }
        TokenCommand::Verify { key, token } => {
            let keys = KeySet::load(&key).with_context(|| format!("loading {}", key.display()))?;
            let token = match token {
                Some(token) => token,
                None => {
                    let mut text = String::new();
                    std::io::stdin().read_to_string(&mut text)?;
                    text
                }
            };
            let claims = keys
                .verify(token.trim(), SystemTime::now())
                .context("the token does not verify")?;
            println!("{}", serde_json::to_string_pretty(&claims)?);
        }
    }
    Ok(())
}
