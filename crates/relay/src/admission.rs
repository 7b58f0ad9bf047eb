//! Deciding what a new session may do: its root and whether it may publish and subscribe.
//!
//! For now every session is admitted anonymously with both grants (authentication is its own
//! issue); the connection path becomes the session root.

use starling_proto::{Path, Role};

/// What one session may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Wire paths are relative to this root.
    pub root: Path,
    pub publish: bool,
    pub subscribe: bool,
}

/// The admission policy.
#[derive(Clone, Debug, Default)]
pub struct Admission;

/// Why a session was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    BadPath,
}

impl Admission {
    /// Decide for a request target (`/path?query`) and the client's declared role.
    pub fn admit(&self, target: Option<&str>, role: Option<Role>) -> Result<Grant, Refusal> {
        let path = target.unwrap_or("");
        let path = path.split_once('?').map(|(p, _)| p).unwrap_or(path);
        let root = Path::new(path).map_err(|_| Refusal::BadPath)?;
        Ok(Grant {
            root,
            publish: role != Some(Role::Subscriber),
            subscribe: role != Some(Role::Publisher),
        })
    }
}
