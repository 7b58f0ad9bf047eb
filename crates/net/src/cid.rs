//! The QUIC connection IDs this endpoint issues: 64 random bits each, plus a keyed
//! signature that lets the endpoint drop packets for IDs it never issued.
//!
//! quinn's default generator draws 24 random bits per ID (3 bytes of nonce, 5 of signature),
//! and quinn checks an ID it sends in a stateless Retry against nothing: a client then sends
//! its next Initial to that ID, and quinn routes by the IDs of established connections
//! before the IDs of connections being set up. A Retry ID equal to one a live connection
//! holds strands the client: its Initials go to the other connection, which discards them,
//! until its own connect times out. With 24 bits the odds are live IDs / 16.7 M per Retry;
//! a relay holding a few thousand connections (five IDs each) strained into sending Retries
//! stranded a client in one fleet test out of two or three. With 64 random bits the odds
//! are negligible at any size a relay reaches.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use quinn::{ConnectionId, ConnectionIdGenerator};
use rand::RngCore;

/// Random bytes per connection ID.
const NONCE_LEN: usize = 8;
/// Signature bytes per connection ID.
const SIGNATURE_LEN: usize = 4;
/// The length of every connection ID this endpoint issues.
pub const CID_LEN: usize = NONCE_LEN + SIGNATURE_LEN;

/// Issues connection IDs of [`CID_LEN`] bytes: a random nonce, then a signature of it under
/// a key of this generator's own.
pub struct SignedCids {
    key: u64,
}

impl SignedCids {
    /// A generator with a fresh random key.
    pub fn new() -> Self {
        Self {
            key: rand::thread_rng().next_u64(),
        }
    }

    fn signature(&self, nonce: &[u8]) -> [u8; SIGNATURE_LEN] {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.key.hash(&mut hasher);
        nonce.hash(&mut hasher);
        let mut signature = [0; SIGNATURE_LEN];
        signature.copy_from_slice(&hasher.finish().to_le_bytes()[..SIGNATURE_LEN]);
        signature
    }
}

impl Default for SignedCids {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnectionIdGenerator for SignedCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut bytes = [0; CID_LEN];
        rand::thread_rng().fill_bytes(&mut bytes[..NONCE_LEN]);
        let signature = self.signature(&bytes[..NONCE_LEN]);
        bytes[NONCE_LEN..].copy_from_slice(&signature);
        ConnectionId::new(&bytes)
    }

    fn validate(&self, cid: &ConnectionId) -> Result<(), quinn_proto::InvalidCid> {
        if cid.len() != CID_LEN {
            return Err(quinn_proto::InvalidCid);
        }
        let (nonce, signature) = cid.split_at(NONCE_LEN);
        if self.signature(nonce) == signature {
            Ok(())
        } else {
            Err(quinn_proto::InvalidCid)
        }
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// The endpoint configuration every Starling QUIC endpoint (server and client) uses.
pub(crate) fn endpoint_config() -> quinn::EndpointConfig {
    let mut config = quinn::EndpointConfig::default();
    config.cid_generator(|| -> Box<dyn ConnectionIdGenerator> { Box::new(SignedCids::new()) });
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_ids_validate_and_others_do_not() {
        let mut cids = SignedCids::new();
        let cid = cids.generate_cid();
        assert_eq!(cid.len(), CID_LEN);
        assert!(cids.validate(&cid).is_ok());
        let mut forged = cid.to_vec();
        forged[0] ^= 1;
        assert!(cids.validate(&ConnectionId::new(&forged)).is_err());
        assert!(SignedCids::new().validate(&cid).is_err(), "another key");
        assert!(cids.validate(&ConnectionId::new(&[0; 8])).is_err());
    }

    #[test]
    fn ids_carry_64_random_bits() {
        let mut cids = SignedCids::new();
        let mut seen = std::collections::HashSet::new();
        // Quinn's default (24 random bits) repeats within a few thousand draws: at 200 000
        // draws a repeat is near certain. Ours must not.
        for _ in 0..200_000 {
            assert!(seen.insert(cids.generate_cid()), "an ID repeated");
        }
    }
}
