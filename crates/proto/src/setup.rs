//! SETUP (uni stream 0x1, lite-05+) and its parameter bag (docs/wire.md §2 "Parameters",
//! §3.2, §4.1).
//!
//! Parameters keep their wire order (decode then encode is byte-identical) and unknown ids
//! are preserved. Known ids are validated on decode and on encode: Probe, Role, Cost and Hop
//! must hold exactly one varint, Path must be UTF-8.

use bytes::Bytes;

use crate::coding::{self, DecodeError, EncodeError};
use crate::framing::Message;
use crate::limits::{MAX_PARAMETERS, MAX_SETUP_SIZE};
use crate::varint::{self, Flavor};
use crate::version::Version;

/// SETUP parameter ids.
pub mod param {
    /// Probe level, `(i)`.
    pub const PROBE: u64 = 0x1;
    /// Request target `path[?query]`, raw bytes (UTF-8).
    pub const PATH: u64 = 0x2;
    /// Role, `(i)`.
    pub const ROLE: u64 = 0x3;
    /// Link price of pulling through the sender, `(i)`.
    pub const COST: u64 = 0x4;
    /// The sender's hop id, `(i)`; 0 counts as absent.
    pub const HOP: u64 = 0x5;
}

/// An ordered `id → bytes` bag: `Count(i) | {ID(i), Len(i), Value}×Count`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parameters(Vec<(u64, Bytes)>);

impl Parameters {
    /// An empty bag.
    pub fn new() -> Parameters {
        Parameters(Vec::new())
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the bag is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A parameter's raw value.
    pub fn get(&self, id: u64) -> Option<&[u8]> {
        self.0.iter().find(|(k, _)| *k == id).map(|(_, v)| &v[..])
    }

    /// A parameter's value read as exactly one varint; trailing bytes are an error.
    pub fn get_varint(&self, id: u64) -> Result<Option<u64>, DecodeError> {
        let Some(mut value) = self.get(id) else {
            return Ok(None);
        };
        let v = coding::read_varint(&mut value, Version::Lite06)?;
        coding::finish(value)?;
        Ok(Some(v))
    }

    /// Set a raw value, replacing an existing entry in place or appending a new one.
    pub fn set(&mut self, id: u64, value: impl Into<Bytes>) {
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == id) {
            Some(slot) => slot.1 = value,
            None => self.0.push((id, value)),
        }
    }

    /// Set a varint value.
    pub fn set_varint(&mut self, id: u64, value: u64) -> Result<(), EncodeError> {
        self.set(id, varint::to_vec(value)?);
        Ok(())
    }

    /// Remove a parameter, returning its value.
    pub fn remove(&mut self, id: u64) -> Option<Bytes> {
        let i = self.0.iter().position(|(k, _)| *k == id)?;
        Some(self.0.remove(i).1)
    }

    /// The parameters in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.0.iter().map(|(k, v)| (*k, &v[..]))
    }

    /// Read a parameter bag; the count is checked before anything is read.
    pub fn decode(r: &mut &[u8], version: Version) -> Result<Parameters, DecodeError> {
        let count = coding::read_varint(r, version)?;
        if count > MAX_PARAMETERS as u64 {
            return Err(DecodeError::TooManyParameters);
        }
        let mut params = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let id = coding::read_varint(r, version)?;
            if params.iter().any(|(k, _)| *k == id) {
                return Err(DecodeError::DuplicateParameter(id));
            }
            let value = coding::read_bytes(r, version)?;
            params.push((id, Bytes::copy_from_slice(value)));
        }
        Ok(Parameters(params))
    }

    /// Write the bag in its order.
    pub fn encode(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if self.0.len() > MAX_PARAMETERS {
            return Err(EncodeError::TooManyParameters);
        }
        for (i, (id, _)) in self.0.iter().enumerate() {
            if self.0[..i].iter().any(|(k, _)| k == id) {
                return Err(EncodeError::DuplicateParameter(*id));
            }
        }
        coding::write_varint(w, self.0.len() as u64, version)?;
        for (id, value) in &self.0 {
            coding::write_varint(w, *id, version)?;
            coding::write_bytes(w, value, version)?;
        }
        Ok(())
    }
}

/// Whether (and how) the sender will send PROBE reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProbeLevel {
    /// 0, or absent.
    #[default]
    None,
    /// 1: sends PROBE reports.
    Report,
    /// 2, or any larger value.
    Increase,
}

impl ProbeLevel {
    /// The wire value.
    pub const fn code(self) -> u64 {
        match self {
            Self::None => 0,
            Self::Report => 1,
            Self::Increase => 2,
        }
    }

    /// Classify a wire value (≥ 2 is `Increase`).
    pub const fn from_code(code: u64) -> ProbeLevel {
        match code {
            0 => Self::None,
            1 => Self::Report,
            _ => Self::Increase,
        }
    }
}

/// The directions a client wired up. Absent, 0 or unknown values mean both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// 1: publishes only.
    Publisher,
    /// 2: subscribes only (the relay then opens no announce stream towards it).
    Subscriber,
}

impl Role {
    /// The wire value.
    pub const fn code(self) -> u64 {
        match self {
            Self::Publisher => 1,
            Self::Subscriber => 2,
        }
    }

    /// The role a wire value names; `None` (both directions) for 0 or unknown values.
    pub const fn from_code(code: u64) -> Option<Role> {
        match code {
            1 => Some(Self::Publisher),
            2 => Some(Self::Subscriber),
            _ => None,
        }
    }
}

/// SETUP: `Len(i) | Parameters`, limited to 64 KiB.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Setup {
    pub params: Parameters,
}

impl Setup {
    /// An empty SETUP.
    pub fn new() -> Setup {
        Setup::default()
    }

    /// Probe (0x1); `None` when absent.
    pub fn probe(&self) -> ProbeLevel {
        self.varint(param::PROBE)
            .map(ProbeLevel::from_code)
            .unwrap_or_default()
    }

    /// Set Probe; `ProbeLevel::None` removes the parameter (moq-net omits it).
    pub fn set_probe(&mut self, level: ProbeLevel) {
        match level {
            ProbeLevel::None => {
                self.params.remove(param::PROBE);
            }
            level => self.set_small(param::PROBE, level.code()),
        }
    }

    /// Path (0x2); an empty value counts as absent. `None` also if not UTF-8 (which the
    /// decoder refuses anyway).
    pub fn path(&self) -> Option<&str> {
        let raw = self.params.get(param::PATH)?;
        std::str::from_utf8(raw).ok().filter(|s| !s.is_empty())
    }

    /// Set Path; `None` or `""` removes it (never send an empty Path).
    pub fn set_path(&mut self, path: Option<&str>) {
        match path {
            Some(p) if !p.is_empty() => self
                .params
                .set(param::PATH, Bytes::copy_from_slice(p.as_bytes())),
            _ => {
                self.params.remove(param::PATH);
            }
        }
    }

    /// Role (0x3); `None` means both directions (absent, 0 or unknown).
    pub fn role(&self) -> Option<Role> {
        self.varint(param::ROLE).and_then(Role::from_code)
    }

    /// Set Role; `None` removes it.
    pub fn set_role(&mut self, role: Option<Role>) {
        match role {
            Some(role) => self.set_small(param::ROLE, role.code()),
            None => {
                self.params.remove(param::ROLE);
            }
        }
    }

    /// Cost (0x4).
    pub fn cost(&self) -> Option<u64> {
        self.varint(param::COST)
    }

    /// Set Cost (saturating at 2^62 - 1); `None` removes it.
    pub fn set_cost(&mut self, cost: Option<u64>) {
        match cost {
            Some(c) => self.set_small(param::COST, c.min(varint::MAX)),
            None => {
                self.params.remove(param::COST);
            }
        }
    }

    /// Hop (0x5); 0 counts as absent.
    pub fn hop(&self) -> Option<u64> {
        self.varint(param::HOP).filter(|&h| h != 0)
    }

    /// Set Hop; `None` or 0 removes it. Fails for ids ≥ 2^62.
    pub fn set_hop(&mut self, hop: Option<u64>) -> Result<(), EncodeError> {
        match hop {
            Some(h) if h != 0 => self.params.set_varint(param::HOP, h)?,
            _ => {
                self.params.remove(param::HOP);
            }
        }
        Ok(())
    }

    fn varint(&self, id: u64) -> Option<u64> {
        self.params.get_varint(id).ok().flatten()
    }

    fn set_small(&mut self, id: u64, v: u64) {
        // Values here are < 2^62 by construction.
        let _ = self.params.set_varint(id, v);
    }

    fn validate(params: &Parameters) -> Result<(), DecodeError> {
        for id in [param::PROBE, param::ROLE, param::COST, param::HOP] {
            params
                .get_varint(id)
                .map_err(|_| DecodeError::InvalidValue("SETUP varint parameter"))?;
        }
        if let Some(path) = params.get(param::PATH) {
            std::str::from_utf8(path).map_err(|_| DecodeError::InvalidUtf8)?;
        }
        Ok(())
    }
}

/// The parameters whose value is one varint. A [`Setup`] holds them as QUIC varints whatever
/// the version; on a version with another varint form they are rewritten on the way in and out.
const VARINT_PARAMS: [u64; 4] = [param::PROBE, param::ROLE, param::COST, param::HOP];

/// `params` with every known varint value rewritten from `from` to `to` (unknown parameters
/// are opaque and kept as they are). A value that is not exactly one varint is refused.
fn transcode(params: &Parameters, from: Flavor, to: Flavor) -> Result<Parameters, DecodeError> {
    if from == to {
        return Ok(params.clone());
    }
    let mut out = params.clone();
    for id in VARINT_PARAMS {
        let Some(mut value) = params.get(id) else {
            continue;
        };
        let v = varint::decode_as(from, &mut value)
            .map_err(|_| DecodeError::InvalidValue("SETUP varint parameter"))?;
        if !value.is_empty() {
            return Err(DecodeError::InvalidValue("SETUP varint parameter"));
        }
        let mut bytes = Vec::with_capacity(9);
        varint::encode_as(to, v, &mut bytes)
            .map_err(|_| DecodeError::InvalidValue("SETUP varint parameter"))?;
        out.set(id, bytes);
    }
    Ok(out)
}

impl Message for Setup {
    const MAX_SIZE: usize = MAX_SETUP_SIZE;

    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !version.has_setup_stream() || !version.is_implemented() {
            return Err(EncodeError::Unsupported);
        }
        Setup::validate(&self.params).map_err(|e| match e {
            DecodeError::InvalidUtf8 => EncodeError::InvalidValue("SETUP Path is not UTF-8"),
            _ => EncodeError::InvalidValue("SETUP varint parameter"),
        })?;
        let params = transcode(&self.params, Flavor::Quic, version.varint())
            .map_err(|_| EncodeError::InvalidValue("SETUP varint parameter"))?;
        params.encode(w, version)
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !version.has_setup_stream() || !version.is_implemented() {
            return Err(DecodeError::Unsupported);
        }
        let params = Parameters::decode(r, version)?;
        let params = transcode(&params, version.varint(), Flavor::Quic)?;
        Setup::validate(&params)?;
        Ok(Setup { params })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors() {
        let mut s = Setup::new();
        s.set_probe(ProbeLevel::Report);
        s.set_hop(Some(0x1A2B3C4D5E6F)).unwrap();
        s.set_role(Some(Role::Subscriber));
        s.set_path(Some("/anon?jwt=abc"));
        s.set_cost(Some(100));
        assert_eq!(s.probe(), ProbeLevel::Report);
        assert_eq!(s.hop(), Some(0x1A2B3C4D5E6F));
        assert_eq!(s.role(), Some(Role::Subscriber));
        assert_eq!(s.path(), Some("/anon?jwt=abc"));
        assert_eq!(s.cost(), Some(100));
        s.set_path(Some(""));
        assert_eq!(s.path(), None);
        s.set_hop(Some(0)).unwrap();
        assert_eq!(s.hop(), None);
        assert!(s.set_hop(Some(1 << 62)).is_err());
        s.params.set(param::ROLE, vec![7]);
        assert_eq!(s.role(), None);
        s.params.set(param::PROBE, vec![9]);
        assert_eq!(s.probe(), ProbeLevel::Increase);
    }

    #[test]
    fn validation() {
        let mut s = Setup::new();
        s.params.set(param::ROLE, vec![1, 2]);
        let mut w = Vec::new();
        assert!(s.encode_body(&mut w, Version::Lite06).is_err());
        let body = [1u8, 3, 2, 1, 2];
        assert_eq!(
            Setup::decode_body(&mut &body[..], Version::Lite06),
            Err(DecodeError::InvalidValue("SETUP varint parameter"))
        );
        let body = [2u8, 9, 0, 9, 0];
        assert_eq!(
            Setup::decode_body(&mut &body[..], Version::Lite06),
            Err(DecodeError::DuplicateParameter(9))
        );
        let body = [0x40u8, 65];
        assert_eq!(
            Setup::decode_body(&mut &body[..], Version::Lite06),
            Err(DecodeError::TooManyParameters)
        );
        assert_eq!(
            Setup::decode_body(&mut &[0u8][..], Version::Lite04),
            Err(DecodeError::Unsupported)
        );
    }
}
