//! The IETF moq-transport rows of the version table: drafts 14 to 22, their names, ALPNs,
//! SETUP codes and varint forms (docs/wire-ietf.md §1).
//!
//! Drafts are ordered, so a layout gate reads `draft >= Draft::D17`.

use std::fmt;

use bytes::{BufMut, BytesMut};

use crate::coding::{DecodeError, EncodeError, Wire};
use crate::framing::Framing;
use crate::varint::Flavor;

/// An IETF moq-transport draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Draft {
    D14,
    D15,
    D16,
    D17,
    D18,
    D19,
    D20,
    D21,
    D22,
}

impl Draft {
    /// Every draft, newest first (moq-relay 0.17.10's preference among the drafts).
    pub const ALL: &'static [Draft] = &[
        Draft::D22,
        Draft::D21,
        Draft::D20,
        Draft::D19,
        Draft::D18,
        Draft::D17,
        Draft::D16,
        Draft::D15,
        Draft::D14,
    ];

    /// The draft number.
    pub const fn number(self) -> u8 {
        match self {
            Self::D14 => 14,
            Self::D15 => 15,
            Self::D16 => 16,
            Self::D17 => 17,
            Self::D18 => 18,
            Self::D19 => 19,
            Self::D20 => 20,
            Self::D21 => 21,
            Self::D22 => 22,
        }
    }

    /// The name (`Display`, `--listen-version`), as moq-dev spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::D14 => "moq-transport-14",
            Self::D15 => "moq-transport-15",
            Self::D16 => "moq-transport-16",
            Self::D17 => "moq-transport-17",
            Self::D18 => "moq-transport-18",
            Self::D19 => "moq-transport-19",
            Self::D20 => "moq-transport-20",
            Self::D21 => "moq-transport-21",
            Self::D22 => "moq-transport-22",
        }
    }

    /// The ALPN and WebTransport protocol: `moq-00` for draft 14, `moqt-NN` after it.
    pub const fn alpn(self) -> &'static str {
        match self {
            Self::D14 => "moq-00",
            Self::D15 => "moqt-15",
            Self::D16 => "moqt-16",
            Self::D17 => "moqt-17",
            Self::D18 => "moqt-18",
            Self::D19 => "moqt-19",
            Self::D20 => "moqt-20",
            Self::D21 => "moqt-21",
            Self::D22 => "moqt-22",
        }
    }

    /// The SETUP code `0xff0000NN` (on the wire only in draft 14's CLIENT/SERVER_SETUP).
    pub const fn code(self) -> u64 {
        0xff00_0000 + self.number() as u64
    }

    /// The draft an ALPN names (matched exactly).
    pub fn from_alpn(alpn: &str) -> Option<Draft> {
        Self::ALL.iter().copied().find(|d| d.alpn() == alpn)
    }

    /// The draft a name names.
    pub fn from_name(name: &str) -> Option<Draft> {
        Self::ALL.iter().copied().find(|d| d.name() == name)
    }

    /// The draft a SETUP code names.
    pub fn from_code(code: u64) -> Option<Draft> {
        Self::ALL.iter().copied().find(|d| d.code() == code)
    }

    /// The QMux-over-WebSocket versions this draft pairs with (`qmux-01.moqt-18` …):
    /// drafts 18 and later require qmux-01.
    pub const fn qmux_versions(self) -> &'static [&'static str] {
        if (self as u8) >= (Self::D18 as u8) {
            &["qmux-01"]
        } else {
            &["qmux-01", "qmux-00"]
        }
    }
}

/// The feature gates: every layout difference between drafts is one of these, so the codec
/// and the session ask what a draft has, never which draft it is (docs/design.md §5).
impl Draft {
    /// Draft 14's layouts: fields inline where later drafts have parameters, versions in
    /// CLIENT/SERVER_SETUP, a refusal message per request, the explicit fetch-object form.
    pub fn has_inline_fields(self) -> bool {
        self == Self::D14
    }

    /// Drafts 14 to 16: one bidi control stream carries SETUP and every request, with
    /// request ids and MAX_REQUEST_ID. From 17: a SETUP uni stream per side and a bidi
    /// stream per request, and replies without request ids.
    pub fn has_control_stream(self) -> bool {
        self <= Self::D16
    }

    /// Parameter keys after the first are deltas (16 on); before, absolute.
    pub fn has_delta_keys(self) -> bool {
        self >= Self::D16
    }

    /// An unknown message parameter is stepped over by its key's parity (14, 15); later
    /// drafts refuse it.
    pub fn skips_unknown_parameters(self) -> bool {
        self <= Self::D15
    }

    /// Parameter values are typed (17 on): a `u8` or `bool` is one raw byte, a Location two
    /// bare varints. Before, every value is a varint or a `(b)`.
    pub fn has_typed_parameters(self) -> bool {
        self >= Self::D17
    }

    /// Requests carry a Required Request ID Delta after their id (17 only).
    pub fn has_request_id_delta(self) -> bool {
        self == Self::D17
    }

    /// Track Properties end SUBSCRIBE_OK, PUBLISH and FETCH_OK (read from 16, its "Track
    /// Extensions"; written from 17).
    pub fn reads_track_properties(self) -> bool {
        self >= Self::D16
    }

    pub fn writes_track_properties(self) -> bool {
        self >= Self::D17
    }

    /// GROUP_ORDER is a SUBSCRIBE_OK and PUBLISH parameter (15 only).
    pub fn has_group_order_parameter_in_replies(self) -> bool {
        self == Self::D15
    }

    /// REQUEST_ERROR carries a retry interval (16 on).
    pub fn has_retry_interval(self) -> bool {
        self >= Self::D16
    }

    /// NAMESPACE and NAMESPACE_DONE answer SUBSCRIBE_NAMESPACE inline, on its own stream, and
    /// PUBLISH_NAMESPACE_DONE/CANCEL name a request (16 on); before, they name a namespace.
    pub fn has_namespace_messages(self) -> bool {
        self >= Self::D16
    }

    /// SUBSCRIBE_NAMESPACE carries Subscribe Options (16 and 17).
    pub fn has_subscribe_options(self) -> bool {
        matches!(self, Self::D16 | Self::D17)
    }

    /// UNSUBSCRIBE_NAMESPACE exists (14, 15).
    pub fn has_unsubscribe_namespace(self) -> bool {
        self <= Self::D15
    }

    /// The MoQ Cluster options and parameters exist (17 on): HOP_ID, RELAY_COST, HOP_PATH,
    /// ROUTE_COST; and RENDEZVOUS_TIMEOUT, the GOAWAY timeout and the GOING_AWAY code arrive.
    pub fn has_cluster(self) -> bool {
        self >= Self::D17
    }

    /// PUBLISH_BLOCKED (17 only).
    pub fn has_publish_blocked(self) -> bool {
        self == Self::D17
    }

    /// GOAWAY ends with a Request ID (18 only).
    pub fn has_goaway_request_id(self) -> bool {
        self == Self::D18
    }

    /// 18 on: SUBSCRIBE_NAMESPACE is `0x50` (with SUBSCRIBE_TRACKS `0x51`), subgroup types
    /// gain the FIRST_OBJECT bit, PADDING streams exist, SUBGROUP_DELIVERY_TIMEOUT and
    /// FILL_TIMEOUT are parameters, and a fetch object's group is a delta.
    pub fn has_first_object_bit(self) -> bool {
        self >= Self::D18
    }

    /// The Range Filters parse (19 on).
    pub fn has_range_filters(self) -> bool {
        self >= Self::D19
    }

    /// 20 on: FILL_PARAMETERS and INCLUDE_PROPERTIES, FETCH naming its track with a filter
    /// (no joining types), inclusive fetch ends, PUBLISH carrying subscription parameters;
    /// SUBSCRIPTION_ENDED and INVALID_JOINING_REQUEST_ID are gone.
    pub fn has_fill(self) -> bool {
        self >= Self::D20
    }

    /// How LOCATION_FILTER is spelled.
    pub fn filter_form(self) -> FilterForm {
        match self {
            Self::D20 | Self::D21 => FilterForm::Fields,
            Self::D22 => FilterForm::Typed,
            _ => FilterForm::Tagged,
        }
    }

    /// An empty fetch object carries a status (14, 15).
    pub fn has_fetch_object_status(self) -> bool {
        self <= Self::D15
    }
}

/// The spellings of LOCATION_FILTER (docs/wire-ietf.md §4.16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterForm {
    /// 14 to 19: a tag then its fields (inline on 14, in a `(b)` after).
    Tagged,
    /// 20 and 21: a `(b)` of zero to four fields, their number giving the meaning.
    Fields,
    /// 22: a Location Filter Type then the fields it names, no length.
    Typed,
}

impl Wire for Draft {
    fn flavor(self) -> Flavor {
        match self {
            Self::D14 | Self::D15 | Self::D16 => Flavor::Quic,
            Self::D17 => Flavor::LeadingOnesDraft17,
            _ => Flavor::LeadingOnes,
        }
    }
}

/// A control message's length is two raw bytes on every draft: a body is at most 65 535 bytes.
impl Framing for Draft {
    fn peek_len(self, buf: &[u8]) -> Result<Option<(u64, usize)>, DecodeError> {
        Ok(buf
            .get(..2)
            .map(|b| (u64::from(u16::from_be_bytes([b[0], b[1]])), 2)))
    }

    fn write_len(self, len: usize, out: &mut BytesMut) -> Result<(), EncodeError> {
        let len = u16::try_from(len).map_err(|_| EncodeError::TooLarge {
            len: len as u64,
            max: u64::from(u16::MAX),
        })?;
        out.put_u16(len);
        Ok(())
    }
}

impl fmt::Display for Draft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert_eq!(Draft::ALL.len(), 9);
        for &draft in Draft::ALL {
            assert_eq!(Draft::from_alpn(draft.alpn()), Some(draft));
            assert_eq!(Draft::from_name(draft.name()), Some(draft));
            assert_eq!(Draft::from_code(draft.code()), Some(draft));
            assert_eq!(draft.to_string(), draft.name());
        }
        assert_eq!(Draft::D14.code(), 0xff00000e);
        assert_eq!(Draft::D22.code(), 0xff000016);
        assert_eq!(Draft::from_alpn("moqt-14"), None);
        assert_eq!(Draft::from_alpn("MOQT-20"), None);
        assert!(Draft::D17 > Draft::D16 && Draft::D16.has_control_stream());
        assert!(!Draft::D17.has_control_stream());
        assert_eq!(Draft::D17.qmux_versions(), &["qmux-01", "qmux-00"]);
        assert_eq!(Draft::D18.qmux_versions(), &["qmux-01"]);
        assert_eq!(Draft::D16.flavor(), Flavor::Quic);
        assert_eq!(Draft::D17.flavor(), Flavor::LeadingOnesDraft17);
        assert_eq!(Draft::D22.flavor(), Flavor::LeadingOnes);
    }

    /// The gate table, draft by draft.
    #[test]
    fn gates() {
        let which = |gate: fn(Draft) -> bool| -> Vec<u8> {
            Draft::ALL
                .iter()
                .rev()
                .filter(|d| gate(**d))
                .map(|d| d.number())
                .collect()
        };
        assert_eq!(which(Draft::has_inline_fields), [14]);
        assert_eq!(which(Draft::has_control_stream), [14, 15, 16]);
        assert_eq!(which(Draft::has_delta_keys), [16, 17, 18, 19, 20, 21, 22]);
        assert_eq!(which(Draft::skips_unknown_parameters), [14, 15]);
        assert_eq!(which(Draft::has_typed_parameters), [17, 18, 19, 20, 21, 22]);
        assert_eq!(which(Draft::has_request_id_delta), [17]);
        assert_eq!(
            which(Draft::reads_track_properties),
            [16, 17, 18, 19, 20, 21, 22]
        );
        assert_eq!(which(Draft::has_subscribe_options), [16, 17]);
        assert_eq!(which(Draft::has_unsubscribe_namespace), [14, 15]);
        assert_eq!(which(Draft::has_goaway_request_id), [18]);
        assert_eq!(which(Draft::has_first_object_bit), [18, 19, 20, 21, 22]);
        assert_eq!(which(Draft::has_range_filters), [19, 20, 21, 22]);
        assert_eq!(which(Draft::has_fill), [20, 21, 22]);
        assert_eq!(which(Draft::has_fetch_object_status), [14, 15]);
        assert_eq!(Draft::D19.filter_form(), FilterForm::Tagged);
        assert_eq!(Draft::D21.filter_form(), FilterForm::Fields);
        assert_eq!(Draft::D22.filter_form(), FilterForm::Typed);
    }
}
