//! SUBSCRIBE, SUBSCRIBE_OK, REQUEST_UPDATE (SUBSCRIBE_UPDATE on 14 and 15) and PUBLISH_DONE
//! (docs/wire-ietf.md §4.3, §4.4, §4.6, §4.8). TRACK_STATUS has SUBSCRIBE's body.
//!
//! Draft 14 writes a subscription's options as fields; from 15 they are parameters, with
//! the defaults moq-net reads for an absent one: priority 128, descending, forwarding,
//! unfiltered, properties wanted.

use crate::coding::{
    read_bool, read_str, read_u8, read_varint, write_bool, write_str, write_u8, write_varint,
    DecodeError, EncodeError,
};
use crate::hops::Hops;
use crate::path::Path;

use super::fields::{
    read_name, read_namespace, read_reply_id, read_request_id, write_name, write_namespace,
    write_reply_id, write_request_id, GroupOrder,
};
use super::filter::{Fill, Filter, Location};
use super::params::{key, ParamReader, ParamWriter};
use super::properties::TrackProperties;
use super::Draft;

/// Wire priority when none is given (lower is more urgent; moq-lite's 127 is 128 here).
pub const DEFAULT_PRIORITY: u8 = 128;

/// SUBSCRIBE (`0x03`), and TRACK_STATUS (`0x0D`), which shares its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    pub request_id: u64,
    pub namespace: Path,
    pub track: String,
    /// Wire priority: lower is more urgent.
    pub priority: u8,
    pub group_order: GroupOrder,
    /// FORWARD: 0 asks the publisher to hold objects back (Starling refuses it, as moq-net).
    pub forward: bool,
    pub filter: Filter,
    /// FILL_PARAMETERS (20 on).
    pub fill: Option<Fill>,
    /// INCLUDE_PROPERTIES (20 on): whether objects carry their properties.
    pub include_properties: bool,
    /// The request carried a Range Filter (19 on), which Starling does not serve.
    pub range_filters: bool,
}

impl Default for Subscribe {
    fn default() -> Self {
        Subscribe {
            request_id: 0,
            namespace: Path::empty(),
            track: String::new(),
            priority: DEFAULT_PRIORITY,
            group_order: GroupOrder::Descending,
            forward: true,
            filter: Filter::Unfiltered,
            fill: None,
            include_properties: true,
            range_filters: false,
        }
    }
}

impl Subscribe {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let mut msg = Subscribe {
            request_id: read_request_id(r, draft)?,
            namespace: read_namespace(r, draft)?,
            track: read_name(r, draft)?,
            ..Subscribe::default()
        };
        if draft.has_inline_fields() {
            msg.priority = read_u8(r)?;
            msg.group_order = GroupOrder::read(r)?;
            msg.forward = read_bool(r)?;
            msg.filter = Filter::decode_tagged(r, draft)?;
            skip_params(r, draft)?;
            return Ok(msg);
        }
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::DELIVERY_TIMEOUT => {
                    params.varint(k, r)?;
                }
                key::AUTHORIZATION_TOKEN => {
                    params.bytes(k, r)?;
                }
                key::RENDEZVOUS_TIMEOUT if draft.has_cluster() => {
                    params.varint(k, r)?;
                }
                key::SUBGROUP_DELIVERY_TIMEOUT if draft.has_first_object_bit() => {
                    params.varint(k, r)?;
                }
                key::FORWARD => msg.forward = params.flag(k, r)?,
                key::SUBSCRIBER_PRIORITY => msg.priority = params.byte(k, r)?,
                key::LOCATION_FILTER => msg.filter = params.filter(k, r)?,
                key::GROUP_ORDER => msg.group_order = GroupOrder::from_param(params.byte(k, r)?),
                key::FILL_PARAMETERS if draft.has_fill() => msg.fill = Some(params.fill(k, r)?),
                key::SUBGROUP_FILTER..=key::OBJECT_PROPERTY_FILTER if draft.has_range_filters() => {
                    params.bytes(k, r)?;
                    msg.range_filters = true;
                }
                key::NEW_GROUP_REQUEST => {
                    params.varint(k, r)?;
                }
                key::INCLUDE_PROPERTIES if draft.has_fill() => {
                    msg.include_properties = params.flag(k, r)?
                }
                _ => params.unknown(k, r)?,
            }
        }
        Ok(msg)
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_request_id(w, self.request_id, draft)?;
        write_namespace(w, &self.namespace, draft)?;
        write_name(w, &self.track, draft)?;
        if draft.has_inline_fields() {
            write_u8(w, self.priority);
            self.group_order.write(w);
            write_bool(w, self.forward);
            self.filter.encode_tagged(w, draft)?;
            return write_varint(w, 0, draft);
        }
        let mut params = ParamWriter::new(draft);
        params.flag(key::FORWARD, self.forward)?;
        params.byte(key::SUBSCRIBER_PRIORITY, self.priority)?;
        if self.filter != Filter::Unfiltered {
            params.filter(key::LOCATION_FILTER, self.filter)?;
        }
        params.byte(key::GROUP_ORDER, self.group_order.code())?;
        if let Some(fill) = self.fill {
            if !draft.has_fill() {
                return Err(EncodeError::InvalidValue("FILL_PARAMETERS needs draft 20"));
            }
            params.fill(key::FILL_PARAMETERS, fill)?;
        }
        if !self.include_properties {
            if !draft.has_fill() {
                return Err(EncodeError::InvalidValue(
                    "INCLUDE_PROPERTIES needs draft 20",
                ));
            }
            params.flag(key::INCLUDE_PROPERTIES, false)?;
        }
        if self.range_filters {
            // Only so a decoded request can be written again: an empty SUBGROUP_FILTER.
            if !draft.has_range_filters() {
                return Err(EncodeError::InvalidValue("range filters need draft 19"));
            }
            params.bytes(key::SUBGROUP_FILTER, &[])?;
        }
        params.finish(w)
    }
}

/// Step over a parameter block whose every key is read and dropped (draft 14's SUBSCRIBE,
/// SUBSCRIBE_OK, FETCH, FETCH_OK, PUBLISH and PUBLISH_OK, where repeats are tolerated).
pub(crate) fn skip_params(r: &mut &[u8], draft: Draft) -> Result<(), DecodeError> {
    let mut params = ParamReader::new(r, draft)?;
    while let Some(k) = params.key(r)? {
        params.unknown(k, r)?;
    }
    Ok(())
}

/// SUBSCRIBE_OK (`0x04`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscribeOk {
    /// On the wire on 14-16.
    pub request_id: u64,
    /// Chosen by the publisher; moq-net uses the SUBSCRIBE's request id.
    pub track_alias: u64,
    /// LARGEST_OBJECT: present once the track has an object.
    pub largest: Option<Location>,
    /// The track's properties; the group order also comes from draft 14's field and
    /// draft 15's parameter.
    pub properties: TrackProperties,
}

impl SubscribeOk {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let mut msg = SubscribeOk {
            request_id: read_reply_id(r, draft)?,
            track_alias: read_varint(r, draft)?,
            ..Default::default()
        };
        if draft.has_inline_fields() {
            let _expires = read_varint(r, draft)?;
            msg.properties.group_order = Some(match GroupOrder::read(r)? {
                GroupOrder::Any => GroupOrder::Descending,
                order => order,
            });
            if read_bool(r)? {
                msg.largest = Some(Location::decode(r, draft)?);
            }
            skip_params(r, draft)?;
            return Ok(msg);
        }
        let mut group_order = None;
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::EXPIRES => {
                    params.varint(k, r)?;
                }
                key::LARGEST_OBJECT => msg.largest = Some(params.location(k, r)?),
                key::GROUP_ORDER => group_order = Some(GroupOrder::from_param(params.byte(k, r)?)),
                _ => params.unknown(k, r)?,
            }
        }
        msg.properties = TrackProperties::decode(r, draft)?;
        msg.properties.group_order = msg.properties.group_order.or(group_order);
        Ok(msg)
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(w, self.request_id, draft)?;
        write_varint(w, self.track_alias, draft)?;
        if draft.has_inline_fields() {
            write_varint(w, 0, draft)?;
            self.properties
                .group_order
                .unwrap_or(GroupOrder::Ascending)
                .write(w);
            write_bool(w, self.largest.is_some());
            if let Some(largest) = self.largest {
                largest.encode(w, draft)?;
            }
            return write_varint(w, 0, draft);
        }
        let mut params = ParamWriter::new(draft);
        if let Some(largest) = self.largest {
            params.location(key::LARGEST_OBJECT, largest)?;
        }
        // GROUP_ORDER is a SUBSCRIBE_OK parameter only on 15; later drafts refuse it (the
        // track property says it from 17).
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

/// REQUEST_UPDATE (`0x02`; SUBSCRIBE_UPDATE on 14 and 15). On a subscription it changes
/// priority, forwarding or range; from 17, on a PUBLISH_NAMESPACE stream, it reprices a
/// route (HOP_PATH, ROUTE_COST). Every parameter either use takes is read here; the session
/// refuses the ones that do not fit the request the update arrived on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestUpdate {
    /// The update's own id.
    pub request_id: u64,
    /// The request it updates (14-16; from 17 the stream says).
    pub subscription_id: u64,
    /// Draft 14's fields.
    pub start: Option<Location>,
    pub end_group: Option<u64>,
    pub priority: Option<u8>,
    pub forward: Option<bool>,
    pub filter: Option<Filter>,
    pub fill: Option<Fill>,
    pub delivery_timeout: Option<u64>,
    pub subgroup_delivery_timeout: Option<u64>,
    pub new_group_request: Option<u64>,
    pub authorization_tokens: Vec<Vec<u8>>,
    pub range_filters: bool,
    /// MoQ Cluster, on a PUBLISH_NAMESPACE stream (17 on).
    pub hop_path: Option<Hops>,
    pub route_cost: Option<u64>,
}

impl RequestUpdate {
    /// Whether the update changes nothing but the priority (and says FORWARD = 1): the
    /// only change the publisher applies; anything else is NOT_SUPPORTED.
    pub fn is_priority_only(&self) -> bool {
        self.start.is_none()
            && self.end_group.is_none()
            && matches!(self.forward, None | Some(true))
            && self.filter.is_none()
            && self.fill.is_none()
            && self.delivery_timeout.is_none()
            && self.subgroup_delivery_timeout.is_none()
            && self.new_group_request.is_none()
            && self.authorization_tokens.is_empty()
            && !self.range_filters
            && self.hop_path.is_none()
            && self.route_cost.is_none()
    }

    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let mut msg = RequestUpdate {
            request_id: read_request_id(r, draft)?,
            ..Default::default()
        };
        if draft.has_control_stream() {
            msg.subscription_id = read_varint(r, draft)?;
        }
        if draft.has_inline_fields() {
            msg.start = Some(Location::decode(r, draft)?);
            msg.end_group = Some(read_varint(r, draft)?);
            msg.priority = Some(read_u8(r)?);
            msg.forward = Some(read_bool(r)?);
            skip_params(r, draft)?;
            return Ok(msg);
        }
        let cluster = draft.has_cluster();
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::DELIVERY_TIMEOUT => msg.delivery_timeout = Some(params.varint(k, r)?),
                key::AUTHORIZATION_TOKEN => {
                    msg.authorization_tokens.push(params.bytes(k, r)?.to_vec())
                }
                key::SUBGROUP_DELIVERY_TIMEOUT if draft.has_first_object_bit() => {
                    msg.subgroup_delivery_timeout = Some(params.varint(k, r)?)
                }
                key::FORWARD => msg.forward = Some(params.flag(k, r)?),
                key::SUBSCRIBER_PRIORITY => msg.priority = Some(params.byte(k, r)?),
                key::LOCATION_FILTER => msg.filter = Some(params.filter(k, r)?),
                key::FILL_PARAMETERS if draft.has_fill() => msg.fill = Some(params.fill(k, r)?),
                key::SUBGROUP_FILTER..=key::TRACK_PROPERTY_FILTER if draft.has_range_filters() => {
                    params.bytes(k, r)?;
                    msg.range_filters = true;
                }
                key::NEW_GROUP_REQUEST => msg.new_group_request = Some(params.varint(k, r)?),
                key::HOP_PATH if cluster => {
                    msg.hop_path = Some(read_hop_path(params.bytes(k, r)?, draft)?)
                }
                key::ROUTE_COST if cluster => msg.route_cost = Some(params.varint(k, r)?),
                _ => params.unknown(k, r)?,
            }
        }
        Ok(msg)
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_request_id(w, self.request_id, draft)?;
        if draft.has_control_stream() {
            write_varint(w, self.subscription_id, draft)?;
        }
        if draft.has_inline_fields() {
            self.start.unwrap_or_default().encode(w, draft)?;
            write_varint(w, self.end_group.unwrap_or(0), draft)?;
            write_u8(w, self.priority.unwrap_or(DEFAULT_PRIORITY));
            write_bool(w, self.forward.unwrap_or(true));
            return write_varint(w, 0, draft);
        }
        let mut params = ParamWriter::new(draft);
        if let Some(v) = self.delivery_timeout {
            params.varint(key::DELIVERY_TIMEOUT, v)?;
        }
        for token in &self.authorization_tokens {
            params.bytes(key::AUTHORIZATION_TOKEN, token)?;
        }
        if let Some(v) = self
            .subgroup_delivery_timeout
            .filter(|_| draft.has_first_object_bit())
        {
            params.varint(key::SUBGROUP_DELIVERY_TIMEOUT, v)?;
        }
        if let Some(v) = self.forward {
            params.flag(key::FORWARD, v)?;
        }
        if let Some(v) = self.priority {
            params.byte(key::SUBSCRIBER_PRIORITY, v)?;
        }
        if let Some(v) = self.filter {
            params.filter(key::LOCATION_FILTER, v)?;
        }
        if let Some(v) = self.fill.filter(|_| draft.has_fill()) {
            params.fill(key::FILL_PARAMETERS, v)?;
        }
        if self.range_filters && draft.has_range_filters() {
            params.bytes(key::SUBGROUP_FILTER, &[])?;
        }
        if let Some(v) = self.new_group_request {
            params.varint(key::NEW_GROUP_REQUEST, v)?;
        }
        if draft.has_cluster() {
            if let Some(hops) = &self.hop_path {
                params.bytes(key::HOP_PATH, &write_hop_path(hops, draft)?)?;
            }
            if let Some(cost) = self.route_cost {
                params.varint(key::ROUTE_COST, cost)?;
            }
        }
        params.finish(w)
    }
}

/// HOP_PATH's value: hop ids as bare varints, no count, origin first; never empty.
pub(crate) fn read_hop_path(mut bytes: &[u8], draft: Draft) -> Result<Hops, DecodeError> {
    let r = &mut bytes;
    let mut hops = Hops::new();
    while !r.is_empty() {
        hops.push(read_varint(r, draft)?)?;
    }
    if hops.is_empty() {
        return Err(DecodeError::InvalidValue("an empty HOP_PATH"));
    }
    Ok(hops)
}

pub(crate) fn write_hop_path(hops: &Hops, draft: Draft) -> Result<Vec<u8>, EncodeError> {
    if hops.is_empty() {
        return Err(EncodeError::InvalidValue("an empty HOP_PATH"));
    }
    let mut out = Vec::new();
    for hop in hops.iter() {
        write_varint(&mut out, hop, draft)?;
    }
    Ok(out)
}

/// PUBLISH_DONE (`0x0B`): the last message of a subscription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishDone {
    /// On the wire on 14-16.
    pub request_id: u64,
    pub status: u64,
    /// The data streams the subscription opened, so the subscriber knows when it has them all.
    pub stream_count: u64,
    pub reason: String,
}

/// PUBLISH_DONE status codes (docs/wire-ietf.md §6.4).
pub mod done {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TRACK_ENDED: u64 = 0x2;
    /// Drafts 14-19 only; read as a clean end.
    pub const SUBSCRIPTION_ENDED: u64 = 0x3;
    pub const UPDATE_FAILED: u64 = 0x8;
}

impl PublishDone {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        Ok(PublishDone {
            request_id: read_reply_id(r, draft)?,
            status: read_varint(r, draft)?,
            stream_count: read_varint(r, draft)?,
            reason: read_str(r, draft)?.to_owned(),
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(w, self.request_id, draft)?;
        write_varint(w, self.status, draft)?;
        write_varint(w, self.stream_count, draft)?;
        write_str(w, &self.reason, draft)
    }

    /// Whether the status is a clean end: TRACK_ENDED, or SUBSCRIPTION_ENDED before 20.
    pub fn is_clean(&self, draft: Draft) -> bool {
        self.status == done::TRACK_ENDED
            || (self.status == done::SUBSCRIPTION_ENDED && !draft.has_fill())
    }
}
