//! Namespace advertisement and discovery: PUBLISH_NAMESPACE and its withdrawal and
//! cancellation, SUBSCRIBE_NAMESPACE (`0x11` to 17, `0x50` from 18) and its inline answers
//! NAMESPACE and NAMESPACE_DONE (16 on), UNSUBSCRIBE_NAMESPACE (14, 15)
//! (docs/wire-ietf.md §4.10, §4.11).
//!
//! From 17 an advertisement to a peer that declared HOP_ID carries the MoQ Cluster
//! parameters, HOP_PATH and ROUTE_COST. The codec reads what is there; the session checks
//! it against what the peer declared.

use crate::coding::{read_str, read_varint, write_str, write_varint, DecodeError, EncodeError};
use crate::hops::Hops;
use crate::path::Path;

use super::fields::{read_namespace, read_request_id, write_namespace, write_request_id};
use super::params::{key, ParamReader, ParamWriter};
use super::subscribe::{read_hop_path, write_hop_path};
use super::Draft;

/// The MoQ Cluster parameters of an advertisement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterParams {
    /// Required when the peer declared HOP_ID.
    pub hop_path: Option<Hops>,
    /// Absent means 0.
    pub route_cost: Option<u64>,
}

impl ClusterParams {
    fn write(&self, params: &mut ParamWriter, draft: Draft) -> Result<(), EncodeError> {
        if let Some(hops) = &self.hop_path {
            params.bytes(key::HOP_PATH, &write_hop_path(hops, draft)?)?;
        }
        if let Some(cost) = self.route_cost {
            params.varint(key::ROUTE_COST, cost)?;
        }
        Ok(())
    }
}

/// PUBLISH_NAMESPACE (`0x06`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishNamespace {
    pub request_id: u64,
    pub namespace: Path,
    /// 17 on; other drafts read these keys as unknown.
    pub cluster: ClusterParams,
}

impl PublishNamespace {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_request_id(r, draft)?;
        let namespace = read_namespace(r, draft)?;
        let mut cluster = ClusterParams::default();
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::AUTHORIZATION_TOKEN => {
                    params.bytes(k, r)?;
                }
                key::HOP_PATH if draft.has_cluster() => {
                    cluster.hop_path = Some(read_hop_path(params.bytes(k, r)?, draft)?)
                }
                key::ROUTE_COST if draft.has_cluster() => {
                    cluster.route_cost = Some(params.varint(k, r)?)
                }
                _ => params.unknown(k, r)?,
            }
        }
        Ok(PublishNamespace {
            request_id,
            namespace,
            cluster,
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_request_id(w, self.request_id, draft)?;
        write_namespace(w, &self.namespace, draft)?;
        let mut params = ParamWriter::new(draft);
        if draft.has_cluster() {
            self.cluster.write(&mut params, draft)?;
        }
        params.finish(w)
    }
}

/// What a withdrawal (PUBLISH_NAMESPACE_DONE `0x09`) or cancellation
/// (PUBLISH_NAMESPACE_CANCEL `0x0C`) names: the namespace on 14 and 15, the request from 16.
/// From 17 neither exists (a FIN withdraws, an error reply refuses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advertisement {
    Namespace(Path),
    Request(u64),
}

impl Advertisement {
    fn decode(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        if !draft.has_control_stream() {
            Err(DecodeError::UnknownType(0x09))
        } else if draft.has_namespace_messages() {
            Ok(Advertisement::Request(read_varint(r, draft)?))
        } else {
            Ok(Advertisement::Namespace(read_namespace(r, draft)?))
        }
    }

    fn encode(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        if !draft.has_control_stream() {
            return Err(EncodeError::Unsupported);
        }
        match (self, draft.has_namespace_messages()) {
            (Advertisement::Namespace(path), false) => write_namespace(w, path, draft),
            (Advertisement::Request(id), true) => write_varint(w, *id, draft),
            _ => Err(EncodeError::Unsupported),
        }
    }
}

/// PUBLISH_NAMESPACE_DONE (`0x09`, 14-16).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishNamespaceDone {
    pub advertisement: Advertisement,
}

impl PublishNamespaceDone {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        Ok(PublishNamespaceDone {
            advertisement: Advertisement::decode(r, draft)?,
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        self.advertisement.encode(w, draft)
    }
}

/// PUBLISH_NAMESPACE_CANCEL (`0x0C`, 14-16).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishNamespaceCancel {
    pub advertisement: Advertisement,
    pub code: u64,
    pub reason: String,
}

impl PublishNamespaceCancel {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        Ok(PublishNamespaceCancel {
            advertisement: Advertisement::decode(r, draft)?,
            code: read_varint(r, draft)?,
            reason: read_str(r, draft)?.to_owned(),
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        self.advertisement.encode(w, draft)?;
        write_varint(w, self.code, draft)?;
        write_str(w, &self.reason, draft)
    }
}

/// SUBSCRIBE_NAMESPACE: `0x11` on 14-17 (with Subscribe Options on 16 and 17), `0x50` from
/// 18.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeNamespace {
    pub request_id: u64,
    pub prefix: Path,
    /// 16 and 17: 1 asks for namespaces only (what moq-net sends).
    pub options: u64,
    /// MoQ Hidden: also advertise hidden namespaces.
    pub hidden: bool,
}

impl SubscribeNamespace {
    /// The type code on `draft`.
    pub fn kind(draft: Draft) -> u64 {
        if draft.has_first_object_bit() {
            0x50
        } else {
            0x11
        }
    }

    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_request_id(r, draft)?;
        let prefix = read_namespace(r, draft)?;
        let options = if draft.has_subscribe_options() {
            read_varint(r, draft)?
        } else {
            1
        };
        let mut hidden = None;
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::AUTHORIZATION_TOKEN => {
                    params.bytes(k, r)?;
                }
                key::FORWARD if !draft.has_inline_fields() && !draft.has_first_object_bit() => {
                    params.flag(k, r)?;
                }
                key::HIDDEN => hidden = Some(params.varint(k, r)?),
                _ => params.unknown(k, r)?,
            }
        }
        let hidden = match hidden {
            None | Some(0) => false,
            Some(1) => true,
            Some(_) => return Err(DecodeError::InvalidValue("HIDDEN")),
        };
        Ok(SubscribeNamespace {
            request_id,
            prefix,
            options,
            hidden,
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_request_id(w, self.request_id, draft)?;
        write_namespace(w, &self.prefix, draft)?;
        if draft.has_subscribe_options() {
            write_varint(w, self.options, draft)?;
        }
        let mut params = ParamWriter::new(draft);
        if self.hidden {
            params.varint(key::HIDDEN, 1)?;
        }
        params.finish(w)
    }
}

/// NAMESPACE (`0x08`, 16 on): a namespace under the subscribed prefix (the suffix). The
/// base form has no parameter block; with the cluster extension it carries one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub suffix: Path,
    /// `Some` when the message carried a parameter block.
    pub cluster: Option<ClusterParams>,
}

impl Namespace {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let suffix = read_namespace(r, draft)?;
        if r.is_empty() {
            return Ok(Namespace {
                suffix,
                cluster: None,
            });
        }
        let mut cluster = ClusterParams::default();
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::HOP_PATH if draft.has_cluster() => {
                    cluster.hop_path = Some(read_hop_path(params.bytes(k, r)?, draft)?)
                }
                key::ROUTE_COST if draft.has_cluster() => {
                    cluster.route_cost = Some(params.varint(k, r)?)
                }
                _ => params.unknown(k, r)?,
            }
        }
        Ok(Namespace {
            suffix,
            cluster: Some(cluster),
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_namespace(w, &self.suffix, draft)?;
        if let Some(cluster) = &self.cluster {
            let mut params = ParamWriter::new(draft);
            cluster.write(&mut params, draft)?;
            params.finish(w)?;
        }
        Ok(())
    }
}

/// A message that is only a namespace: NAMESPACE_DONE (`0x0E`, 16 on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceDone {
    pub suffix: Path,
}

impl NamespaceDone {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        Ok(NamespaceDone {
            suffix: read_namespace(r, draft)?,
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_namespace(w, &self.suffix, draft)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/wire-ietf.md §10.5: SUBSCRIBE_NAMESPACE on 22 and NAMESPACE's base form.
    #[test]
    fn bodies() {
        let request = SubscribeNamespace {
            request_id: 2,
            prefix: Path::empty(),
            options: 1,
            hidden: false,
        };
        let mut out = Vec::new();
        request.encode_body(&mut out, Draft::D22).unwrap();
        assert_eq!(out, [2, 0, 0]);
        assert_eq!(
            SubscribeNamespace::decode_body(&mut &out[..], Draft::D22),
            Ok(request.clone())
        );
        let mut out = Vec::new();
        request.encode_body(&mut out, Draft::D17).unwrap();
        assert_eq!(out, [2, 0, 0, 1, 0]);

        let namespace = Namespace {
            suffix: Path::new("bbb").unwrap(),
            cluster: None,
        };
        let mut out = Vec::new();
        namespace.encode_body(&mut out, Draft::D22).unwrap();
        assert_eq!(out, [1, 3, b'b', b'b', b'b']);
        // A parameter block after it is read as one (the session decides if it may be).
        let with_block = [1, 3, b'b', b'b', b'b', 0];
        assert_eq!(
            Namespace::decode_body(&mut &with_block[..], Draft::D22)
                .unwrap()
                .cluster,
            Some(ClusterParams::default())
        );
    }

    #[test]
    fn cluster_params() {
        let advert = PublishNamespace {
            request_id: 1,
            namespace: Path::new("room/alice").unwrap(),
            cluster: ClusterParams {
                hop_path: Some(Hops::from_vec(vec![7, 300]).unwrap()),
                route_cost: Some(2),
            },
        };
        let mut out = Vec::new();
        advert.encode_body(&mut out, Draft::D22).unwrap();
        assert_eq!(
            PublishNamespace::decode_body(&mut &out[..], Draft::D22),
            Ok(advert.clone())
        );
        // Before 17 the keys do not exist: not written, and fatal on 16 when read.
        let mut d16 = Vec::new();
        advert.encode_body(&mut d16, Draft::D16).unwrap();
        assert_eq!(
            PublishNamespace::decode_body(&mut &d16[..], Draft::D16)
                .unwrap()
                .cluster,
            ClusterParams::default()
        );
        let mut forged = d16[..d16.len() - 1].to_vec();
        forged.extend_from_slice(&[1, 0x80, 0x04, 0x0b, 0x58, 1]);
        assert!(PublishNamespace::decode_body(&mut &forged[..], Draft::D16).is_err());
        // An empty HOP_PATH, or one that repeats a hop, is refused.
        let mut empty = Vec::new();
        write_request_id(&mut empty, 1, Draft::D22).unwrap();
        empty.extend_from_slice(&[0, 1, 0xc4, 0x0b, 0x57, 0]);
        assert!(PublishNamespace::decode_body(&mut &empty[..], Draft::D22).is_err());
        assert!(read_hop_path(&[5, 5], Draft::D22).is_err());
    }

    #[test]
    fn withdrawals_by_draft() {
        let by_name = PublishNamespaceDone {
            advertisement: Advertisement::Namespace(Path::new("a").unwrap()),
        };
        let mut out = Vec::new();
        by_name.encode_body(&mut out, Draft::D15).unwrap();
        assert_eq!(
            PublishNamespaceDone::decode_body(&mut &out[..], Draft::D15),
            Ok(by_name.clone())
        );
        assert!(by_name.encode_body(&mut Vec::new(), Draft::D16).is_err());
        let cancel = PublishNamespaceCancel {
            advertisement: Advertisement::Request(4),
            code: 0x20,
            reason: "loop".into(),
        };
        let mut out = Vec::new();
        cancel.encode_body(&mut out, Draft::D16).unwrap();
        assert_eq!(
            PublishNamespaceCancel::decode_body(&mut &out[..], Draft::D16),
            Ok(cancel)
        );
        assert!(PublishNamespaceDone::decode_body(&mut &[0][..], Draft::D17).is_err());
    }
}
