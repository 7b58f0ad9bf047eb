//! Where token keys come from, re-read when their files change.
//!
//! A key file or a directory of `{kid}.jwk` files is consulted at every decision, so a key
//! added on disk takes effect at once, without a restart. A parsed key is kept while its
//! file's length, modification time and inode stay the same. Live sessions are not
//! re-checked one by one: [`KeyReader::sweep`] looks at every file in use once per auth
//! maximum age, and only a replaced or removed file sends the held decisions to be checked
//! again (those resting on an unchanged file reuse their verification).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use starling_auth::{AuthError, Key, KeySet};

/// The keys that verify tokens.
#[derive(Clone, Debug)]
pub enum KeySource {
    /// Keys fixed at startup (embedding, tests).
    Fixed(KeySet),
    /// One key file (or a JWKS document), re-read on change.
    File(PathBuf),
    /// A directory of `{kid}.jwk` files; the token's `kid` picks the file.
    Dir(PathBuf),
}

impl From<KeySet> for KeySource {
    fn from(keys: KeySet) -> Self {
        KeySource::Fixed(keys)
    }
}

impl KeySource {
    /// Check that the source reads now, so a misconfigured relay fails at startup.
    pub fn check(&self) -> Result<(), AuthError> {
        match self {
            KeySource::Fixed(_) => Ok(()),
            KeySource::File(path) => KeySet::load(path).map(drop),
            KeySource::Dir(path) => {
                if path.is_dir() {
                    Ok(())
                } else {
                    Err(AuthError::InvalidKey(format!(
                        "{} is not a directory",
                        path.display()
                    )))
                }
            }
        }
    }
}

/// File identity: a change to any of these means the file is read again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Ok(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        })
    }
}

/// At most this many parsed key files are kept (a directory may hold more; the rest are
/// parsed when used).
const MAX_CACHED_FILES: usize = 1024;

/// Reads keys from a [`KeySource`], keeping parsed files while they are unchanged.
#[derive(Debug)]
pub struct KeyReader {
    source: KeySource,
    /// A fixed source's keys, handed out as one value (verified tokens are remembered per
    /// key set).
    fixed: Option<Arc<KeySet>>,
    parsed: Mutex<HashMap<PathBuf, (Stamp, Arc<KeySet>)>>,
    /// Parsed files were dropped for room since the last sweep, unswept.
    forgotten: AtomicBool,
}

impl KeyReader {
    pub fn new(source: KeySource) -> Self {
        let fixed = match &source {
            KeySource::Fixed(keys) => Some(Arc::new(keys.clone())),
            _ => None,
        };
        KeyReader {
            source,
            fixed,
            parsed: Mutex::new(HashMap::new()),
            forgotten: AtomicBool::new(false),
        }
    }

    /// The keys that may verify a token naming `kid`, as they are on disk now.
    pub fn keys_for(&self, kid: Option<&str>) -> Result<Arc<KeySet>, AuthError> {
        match &self.source {
            KeySource::Fixed(keys) => {
                Ok(self.fixed.clone().unwrap_or_else(|| Arc::new(keys.clone())))
            }
            KeySource::File(path) => self.read(path, None),
            KeySource::Dir(dir) => {
                let kid = kid.ok_or(AuthError::MissingKid(0))?;
                starling_auth::validate_kid(kid)?;
                let path = dir.join(format!("{kid}.jwk"));
                self.read(&path, Some(kid))
                    .map_err(|_| AuthError::KeyNotFound(kid.to_string()))
            }
        }
    }

    /// The keys in `path`; a key without its own `kid` takes `named` (a directory file's
    /// name), as at load time.
    fn read(&self, path: &Path, named: Option<&str>) -> Result<Arc<KeySet>, AuthError> {
        let stamp = Stamp::of(path)?;
        let mut parsed = self.parsed.lock().expect("key cache lock");
        if let Some((seen, keys)) = parsed.get(path) {
            if *seen == stamp {
                return Ok(keys.clone());
            }
        }
        let mut keys = KeySet::load(path)?;
        if let Some(kid) = named {
            keys = KeySet::new(
                keys.keys()
                    .iter()
                    .map(|key| match key.kid() {
                        Some(_) => Ok(key.clone()),
                        None => {
                            let mut jwk = key.jwk().clone();
                            jwk.kid = Some(kid.to_string());
                            Key::from_jwk(jwk)
                        }
                    })
                    .collect::<Result<_, _>>()?,
            );
        }
        let keys = Arc::new(keys);
        if parsed.len() >= MAX_CACHED_FILES {
            // Forgotten files are no longer swept: treat them as changed.
            parsed.clear();
            self.forgotten.store(true, Ordering::Release);
        }
        parsed.insert(path.to_path_buf(), (stamp, keys.clone()));
        Ok(keys)
    }

    /// Look at every key file in use now: whether any was replaced or removed since it was
    /// read (or since the last sweep). Changed files are forgotten, so the next decision
    /// reads them again. A fixed source never changes.
    pub fn sweep(&self) -> bool {
        let paths: Vec<(PathBuf, Stamp)> = self
            .parsed
            .lock()
            .expect("key cache lock")
            .iter()
            .map(|(path, (stamp, _))| (path.clone(), *stamp))
            .collect();
        // The `stat`s happen outside the lock.
        let changed: Vec<PathBuf> = paths
            .into_iter()
            .filter(|(path, seen)| Stamp::of(path).ok() != Some(*seen))
            .map(|(path, _)| path)
            .collect();
        let mut parsed = self.parsed.lock().expect("key cache lock");
        for path in &changed {
            parsed.remove(path);
        }
        self.forgotten.swap(false, Ordering::AcqRel) || !changed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_auth::Algorithm;

    fn write_key(path: &Path) -> Key {
        let key = Key::generate(Algorithm::HS256).unwrap();
        std::fs::write(path, key.to_encoded()).unwrap();
        key
    }

    #[test]
    fn a_sweep_reports_files_in_use_that_were_replaced_or_removed() {
        let dir = tempfile::tempdir().unwrap();
        let reader = KeyReader::new(KeySource::Dir(dir.path().to_path_buf()));
        assert!(!reader.sweep(), "nothing read, nothing changed");
        write_key(&dir.path().join("a.jwk"));
        write_key(&dir.path().join("b.jwk"));
        let a = reader.keys_for(Some("a")).unwrap();
        reader.keys_for(Some("b")).unwrap();
        assert!(!reader.sweep());
        assert!(Arc::ptr_eq(&a, &reader.keys_for(Some("a")).unwrap()));
        // A file nobody used changing is nothing to report.
        write_key(&dir.path().join("c.jwk"));
        assert!(!reader.sweep());
        let staged = dir.path().join("staged");
        write_key(&staged);
        std::fs::rename(&staged, dir.path().join("a.jwk")).unwrap();
        assert!(reader.sweep());
        assert!(!reader.sweep(), "reported once");
        assert!(!Arc::ptr_eq(&a, &reader.keys_for(Some("a")).unwrap()));
        std::fs::remove_file(dir.path().join("b.jwk")).unwrap();
        assert!(reader.sweep());
        assert!(reader.keys_for(Some("b")).is_err());
        assert!(!reader.sweep());
        let fixed = KeyReader::new(KeySource::Fixed(KeySet::new(vec![])));
        assert!(!fixed.sweep());
    }

    #[test]
    fn a_directory_is_read_per_kid_and_follows_changes() {
        let dir = tempfile::tempdir().unwrap();
        let reader = KeyReader::new(KeySource::Dir(dir.path().to_path_buf()));
        assert!(reader.keys_for(Some("a")).is_err());
        let first = write_key(&dir.path().join("a.jwk"));
        let keys = reader.keys_for(Some("a")).unwrap();
        assert_eq!(keys.keys()[0].to_json(), first.to_json());
        assert_eq!(keys.keys()[0].kid(), first.kid());
        // Unchanged: the same parsed set.
        assert!(Arc::ptr_eq(&keys, &reader.keys_for(Some("a")).unwrap()));
        // Replaced (a rename gives a new inode): read again.
        let staged = dir.path().join("staged");
        let second = write_key(&staged);
        std::fs::rename(&staged, dir.path().join("a.jwk")).unwrap();
        let keys = reader.keys_for(Some("a")).unwrap();
        assert_eq!(keys.keys()[0].to_json(), second.to_json());
        // Removed: refused.
        std::fs::remove_file(dir.path().join("a.jwk")).unwrap();
        assert!(reader.keys_for(Some("a")).is_err());
        // A kid that would leave the directory is refused before touching the disk.
        assert!(reader.keys_for(Some("../a")).is_err());
        assert!(reader.keys_for(None).is_err());
    }
}
