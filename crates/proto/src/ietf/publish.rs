//! PUBLISH (`0x1D`) and PUBLISH_OK (`0x1E`) (docs/wire-ietf.md §4.9): a publisher offering
//! one track. moq-dev refuses every PUBLISH (its model routes per namespace), and so does
//! Starling; the codec reads them so the refusal can name the request, and writes them so
//! they can be tested.

use crate::coding::{
    read_bool, read_u8, read_varint, write_bool, write_u8, write_varint, DecodeError, EncodeError,
};
use crate::path::Path;

use super::fields::{
    read_name, read_namespace, read_reply_id, read_request_id, write_name, write_namespace,
    write_reply_id, write_request_id, GroupOrder,
};
use super::filter::{Filter, Location};
use super::params::{key, ParamReader, ParamWriter};
use super::properties::TrackProperties;
use super::subscribe::{skip_params, DEFAULT_PRIORITY};
use super::Draft;

/// PUBLISH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    pub request_id: u64,
    pub namespace: Path,
    pub track: String,
    pub track_alias: u64,
    pub largest: Option<Location>,
    pub forward: bool,
    pub properties: TrackProperties,
}

impl Publish {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let mut msg = Publish {
            request_id: read_request_id(r, draft)?,
            namespace: read_namespace(r, draft)?,
            track: read_name(r, draft)?,
            track_alias: read_varint(r, draft)?,
            largest: None,
            forward: true,
            properties: TrackProperties::default(),
        };
        if draft.has_inline_fields() {
            let order = match GroupOrder::read(r)? {
                GroupOrder::Any => GroupOrder::Descending,
                order => order,
            };
            msg.properties.group_order = Some(order);
            if read_bool(r)? {
                msg.largest = Some(Location::decode(r, draft)?);
            }
            msg.forward = read_bool(r)?;
            skip_params(r, draft)?;
            return Ok(msg);
        }
        let subscription = draft.has_fill();
        let mut group_order = None;
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::DELIVERY_TIMEOUT
                    if draft.has_group_order_parameter_in_replies() || subscription =>
                {
                    params.varint(k, r)?;
                }
                key::AUTHORIZATION_TOKEN => {
                    params.bytes(k, r)?;
                }
                key::SUBGROUP_DELIVERY_TIMEOUT if subscription => {
                    params.varint(k, r)?;
                }
                key::EXPIRES => {
                    params.varint(k, r)?;
                }
                key::LARGEST_OBJECT => msg.largest = Some(params.location(k, r)?),
                key::FORWARD => msg.forward = params.flag(k, r)?,
                key::SUBSCRIBER_PRIORITY if subscription => {
                    params.byte(k, r)?;
                }
                key::LOCATION_FILTER if subscription => {
                    params.filter(k, r)?;
                }
                key::GROUP_ORDER => group_order = Some(GroupOrder::from_param(params.byte(k, r)?)),
                _ => params.unknown(k, r)?,
            }
        }
        msg.properties = TrackProperties::decode(r, draft)?;
        msg.properties.group_order = msg.properties.group_order.or(group_order);
        Ok(msg)
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_request_id(w, self.request_id, draft)?;
        write_namespace(w, &self.namespace, draft)?;
        write_name(w, &self.track, draft)?;
        write_varint(w, self.track_alias, draft)?;
        if draft.has_inline_fields() {
            self.properties
                .group_order
                .unwrap_or(GroupOrder::Ascending)
                .write(w);
            write_bool(w, self.largest.is_some());
            if let Some(largest) = self.largest {
                largest.encode(w, draft)?;
            }
            write_bool(w, self.forward);
            return write_varint(w, 0, draft);
        }
        let mut params = ParamWriter::new(draft);
        if let Some(largest) = self.largest {
            params.location(key::LARGEST_OBJECT, largest)?;
        }
        params.flag(key::FORWARD, self.forward)?;
        if let (true, Some(order)) = (
            draft.has_group_order_parameter_in_replies(),
            self.properties.group_order,
        ) {
            params.byte(key::GROUP_ORDER, order.code())?;
        }
        params.finish(w)?;
        self.properties.encode(w, draft)
    }
}

/// PUBLISH_OK: the subscription a PUBLISH's receiver takes up (its parameters move into
/// PUBLISH from draft 20, leaving an empty block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishOk {
    /// On the wire on 14-16.
    pub request_id: u64,
    pub forward: bool,
    pub priority: u8,
    pub group_order: GroupOrder,
    pub filter: Filter,
}

impl Default for PublishOk {
    fn default() -> Self {
        PublishOk {
            request_id: 0,
            forward: true,
            priority: DEFAULT_PRIORITY,
            group_order: GroupOrder::Descending,
            filter: Filter::Unfiltered,
        }
    }
}

impl PublishOk {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let mut msg = PublishOk {
            request_id: read_reply_id(r, draft)?,
            ..Default::default()
        };
        if draft.has_inline_fields() {
            msg.forward = read_bool(r)?;
            msg.priority = read_u8(r)?;
            msg.group_order = GroupOrder::read(r)?;
            msg.filter = Filter::decode_tagged(r, draft)?;
            skip_params(r, draft)?;
            return Ok(msg);
        }
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::EXPIRES => {
                    params.varint(k, r)?;
                }
                key::FORWARD => msg.forward = params.flag(k, r)?,
                key::SUBSCRIBER_PRIORITY => msg.priority = params.byte(k, r)?,
                key::LOCATION_FILTER => msg.filter = params.filter(k, r)?,
                key::GROUP_ORDER => msg.group_order = GroupOrder::from_param(params.byte(k, r)?),
                _ => params.unknown(k, r)?,
            }
        }
        Ok(msg)
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(w, self.request_id, draft)?;
        if draft.has_inline_fields() {
            write_bool(w, self.forward);
            write_u8(w, self.priority);
            self.group_order.write(w);
            self.filter.encode_tagged(w, draft)?;
            return write_varint(w, 0, draft);
        }
        let mut params = ParamWriter::new(draft);
        if !draft.has_fill() {
            params.flag(key::FORWARD, self.forward)?;
            params.byte(key::SUBSCRIBER_PRIORITY, self.priority)?;
            if self.filter != Filter::Unfiltered {
                params.filter(key::LOCATION_FILTER, self.filter)?;
            }
            params.byte(key::GROUP_ORDER, self.group_order.code())?;
        }
        params.finish(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let publish = Publish {
            request_id: 1,
            namespace: Path::new("room").unwrap(),
            track: "video".into(),
            track_alias: 9,
            largest: Some(Location {
                group: 3,
                object: 1,
            }),
            forward: true,
            properties: TrackProperties {
                timescale: Some(90_000),
                ..Default::default()
            },
        };
        for draft in [Draft::D17, Draft::D20, Draft::D22] {
            let mut out = Vec::new();
            publish.encode_body(&mut out, draft).unwrap();
            assert_eq!(
                Publish::decode_body(&mut &out[..], draft).unwrap(),
                publish,
                "{draft}"
            );
        }
        let ok = PublishOk::default();
        for draft in [Draft::D14, Draft::D16, Draft::D20] {
            let mut out = Vec::new();
            ok.encode_body(&mut out, draft).unwrap();
            assert_eq!(
                PublishOk::decode_body(&mut &out[..], draft).unwrap(),
                ok,
                "{draft}"
            );
        }
    }
}
