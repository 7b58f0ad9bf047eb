//! A publisher driven by hand at the wire level, over any transport: it announces one
//! broadcast, answers TRACK with the default info, and hands every SUBSCRIBE the relay sends it
//! to the test, which then writes the subscribe responses and group streams it wants, in the
//! order it wants (out of order, cut short, with crafted sequences). Shared by the session
//! tests (in-memory transport) and the hostile-peer suite (real QUIC).

#![allow(dead_code)]

use bytes::{BufMut, Bytes, BytesMut};
use starling_proto::{
    encode_message, encode_typed, varint, Announce, AnnounceOk, AnnounceRequest, AnnounceStatus,
    Announcement, CompressedAnnouncement, FrameHeader, GroupHeader, Hops, HopsRef, Message, Path,
    PathRef, RouteCost, Subscribe, SubscribeResponse, Track, TrackInfo, Version,
};
use starling_transport::{RecvStream, SendStream, Transport};
use tokio::sync::mpsc;

/// Read one message from `recv` (after whatever `buf` holds); `None` at a clean FIN.
pub async fn read_message<M: Message, R: RecvStream>(
    recv: &mut R,
    buf: &mut BytesMut,
    version: Version,
) -> Option<M> {
    loop {
        if let Some(msg) = starling_proto::decode_message::<M>(buf, version).unwrap() {
            return Some(msg);
        }
        match recv.read(1 << 16).await.unwrap() {
            Some(chunk) => buf.extend_from_slice(&chunk),
            None => {
                assert!(buf.is_empty(), "a message cut short by FIN");
                return None;
            }
        }
    }
}

/// Read a bidi stream's type varint.
async fn read_type<R: RecvStream>(recv: &mut R, buf: &mut BytesMut) -> Option<u64> {
    loop {
        if let Some((kind, n)) = varint::peek(buf) {
            let _ = buf.split_to(n);
            return Some(kind);
        }
        let chunk = recv.read(1 << 16).await.ok()??;
        buf.extend_from_slice(&chunk);
    }
}

/// A SUBSCRIBE the relay sent the hand-driven publisher, with its stream.
pub struct Upstream<T: Transport> {
    pub id: u64,
    pub track: String,
    pub priority: u8,
    pub send: T::Send,
    _recv: T::Recv,
}

impl<T: Transport> Upstream<T> {
    /// Write one subscribe response on the subscription's stream.
    pub async fn respond(&mut self, response: SubscribeResponse, version: Version) {
        let mut out = BytesMut::new();
        encode_typed(&response, version, &mut out).unwrap();
        self.send.write(out.freeze()).await.unwrap();
    }
}

/// Serve the publisher half of a session over `peer` (whose SETUP is done): announce
/// `broadcast`, answer TRACK, hand each SUBSCRIBE over the returned channel. `keep` is held
/// for as long as the publisher runs (the relay's side of an in-memory session, say).
pub fn serve<T: Transport>(
    peer: T,
    version: Version,
    broadcast: Path,
    keep: impl Send + 'static,
) -> mpsc::Receiver<Upstream<T>> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let _keep = keep;
        let mut held = Vec::new();
        loop {
            let Ok((mut send, mut recv)) = peer.accept_bi().await else {
                return;
            };
            let mut buf = BytesMut::new();
            match read_type(&mut recv, &mut buf).await {
                Some(0x01) => {
                    let _: AnnounceRequest = read_message(&mut recv, &mut buf, version)
                        .await
                        .expect("an announce request");
                    let mut out = BytesMut::new();
                    let ok = AnnounceOk {
                        hop: starling_session::random_hop(),
                        active_count: 1,
                    };
                    encode_message(&ok, version, &mut out).unwrap();
                    if version == Version::Lite05 {
                        let announce = Announce {
                            status: AnnounceStatus::Active,
                            suffix: broadcast.clone(),
                            hops: Hops::default(),
                        };
                        encode_message(&announce, version, &mut out).unwrap();
                    } else if version.has_announce_compression() {
                        let start = CompressedAnnouncement::Start {
                            suffix: PathRef::literal(broadcast.clone()),
                            hops: HopsRef::literal(Hops::default()),
                            cost: RouteCost::default(),
                        };
                        encode_typed(&start, version, &mut out).unwrap();
                    } else {
                        let start = Announcement::Start {
                            suffix: broadcast.clone(),
                            hops: Hops::default(),
                            cost: RouteCost::default(),
                        };
                        encode_typed(&start, version, &mut out).unwrap();
                    }
                    send.write(out.freeze()).await.unwrap();
                    held.push((send, recv));
                }
                Some(0x06) => {
                    let _: Track = read_message(&mut recv, &mut buf, version)
                        .await
                        .expect("a track request");
                    let mut out = BytesMut::new();
                    encode_message(&TrackInfo::default(), version, &mut out).unwrap();
                    send.write(out.freeze()).await.unwrap();
                    send.finish().unwrap();
                    held.push((send, recv));
                }
                Some(0x02) => {
                    let subscribe: Subscribe = read_message(&mut recv, &mut buf, version)
                        .await
                        .expect("a subscribe");
                    let upstream = Upstream {
                        id: subscribe.id,
                        track: subscribe.track.clone(),
                        priority: subscribe.priority,
                        send,
                        _recv: recv,
                    };
                    if tx.send(upstream).await.is_err() {
                        return;
                    }
                }
                _ => held.push((send, recv)),
            }
        }
    });
    rx
}

/// A group stream's opening: the stream type, the group header and one frame header.
pub fn group_head(id: u64, sequence: u64, frame: FrameHeader, version: Version) -> BytesMut {
    let mut out = BytesMut::new();
    out.put_u8(0x00);
    let header = GroupHeader {
        subscribe_id: id,
        sequence,
        frame_start: 0,
    };
    encode_message(&header, version, &mut out).unwrap();
    starling_proto::encode_frame_header(&frame, version, &mut out).unwrap();
    out
}

/// Open one group stream of one frame (`g<sequence>` at `sequence * 100` ms) and FIN it.
pub async fn send_group<T: Transport>(peer: &T, id: u64, sequence: u64, version: Version) {
    let payload = format!("g{sequence}");
    let frame = FrameHeader {
        timestamp_delta: (sequence * 100) as i64,
        size: payload.len() as u64,
    };
    let mut out = group_head(id, sequence, frame, version);
    out.extend_from_slice(payload.as_bytes());
    let mut stream = peer.open_uni().await.unwrap();
    stream.write(Bytes::from(out)).await.unwrap();
    stream.finish().unwrap();
}
