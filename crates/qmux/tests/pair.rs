//! Two connections exchanging records in memory: streams, credit, resets, stops, closes,
//! pings, priorities, and every limit violation.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use starling_qmux::{
    CloseReason, Config, Connection, Dir, Event, Frame, Framing, Side, StreamError, StreamFrame,
    StreamId, TransportCode, WireVersion,
};

struct Pair {
    client: Connection,
    server: Connection,
    now: Instant,
    /// Records the client sent, newest last (for inspection).
    client_sent: Vec<Bytes>,
    server_sent: Vec<Bytes>,
}

fn config(version: WireVersion, framing: Framing, side: Side) -> Config {
    let mut c = Config::new(version, framing, side);
    c.rtt_interval = None;
    c
}

impl Pair {
    fn new(version: WireVersion) -> Self {
        Self::with(
            config(version, Framing::Message, Side::Client),
            config(version, Framing::Message, Side::Server),
        )
    }

    fn with(client: Config, server: Config) -> Self {
        let now = Instant::now();
        let mut pair = Pair {
            client: Connection::new(client, now),
            server: Connection::new(server, now),
            now,
            client_sent: Vec::new(),
            server_sent: Vec::new(),
        };
        pair.drive();
        pair
    }

    /// Exchange records until both sides are quiet (bounded: a livelock fails the test).
    fn drive(&mut self) {
        for _ in 0..100_000 {
            let mut progress = false;
            while let Some(r) = self.client.poll_transmit(self.now) {
                self.client_sent.push(r.clone());
                self.server.handle_record(r, self.now);
                progress = true;
            }
            while let Some(r) = self.server.poll_transmit(self.now) {
                self.server_sent.push(r.clone());
                self.client.handle_record(r, self.now);
                progress = true;
            }
            if !progress {
                return;
            }
        }
        panic!("livelock");
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        self.drive();
    }

    /// Deliver a raw record from the client to the server, bypassing the client.
    fn inject_to_server(&mut self, frames: &[Frame]) {
        let mut buf = BytesMut::new();
        for f in frames {
            f.encode(&mut buf);
        }
        self.server.handle_record(buf.freeze(), self.now);
        self.drive();
    }
}

fn events(conn: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| conn.poll_event()).collect()
}

fn read_all(conn: &mut Connection, id: StreamId) -> (Vec<u8>, Result<(), StreamError>) {
    let mut out = Vec::new();
    loop {
        match conn.read(id, usize::MAX) {
            Ok(Some(chunk)) => out.extend_from_slice(&chunk),
            Ok(None) => return (out, Ok(())),
            Err(e) => return (out, Err(e)),
        }
    }
}

fn transport_close(conn: &Connection) -> TransportCode {
    match conn.close_reason() {
        Some(CloseReason::LocalTransport(err)) => err.code,
        other => panic!("expected a transport close, got {other:?}"),
    }
}

#[test]
fn handshake_sends_relay_parameters_first() {
    let pair = Pair::new(WireVersion::Qmux01);
    assert!(pair.client.is_established() && pair.server.is_established());
    assert_eq!(pair.server_sent[0].len(), 62, "the relay's TP frame alone");
    assert_eq!(
        &pair.server_sent[0][..8],
        &[0xff, 0x51, 0x53, 0x30, 0x0d, 0x0a, 0x0d, 0x0a]
    );
}

#[test]
fn bidi_stream_both_ways_with_fin() {
    let mut p = Pair::new(WireVersion::Qmux01);
    let id = p.client.open(Dir::Bi).unwrap();
    assert_eq!(id, StreamId(0));
    assert_eq!(p.client.write(id, Bytes::from_static(b"hello")), Ok(5));
    p.client.finish(id).unwrap();
    p.drive();
    assert!(events(&mut p.server).contains(&Event::StreamOpened(Dir::Bi)));
    let sid = p.server.accept(Dir::Bi).unwrap();
    assert_eq!(read_all(&mut p.server, sid), (b"hello".to_vec(), Ok(())));
    p.server.write(sid, Bytes::from_static(b"world")).unwrap();
    p.server.finish(sid).unwrap();
    p.drive();
    assert_eq!(read_all(&mut p.client, id), (b"world".to_vec(), Ok(())));
    assert_eq!(p.client.poll_stopped(id), Ok(None));
    // Both halves done on both sides: the streams are retired.
    assert_eq!(p.server.read(sid, 10), Err(StreamError::Closed(sid)));
}

#[test]
fn many_small_writes_arrive_in_order() {
    let mut p = Pair::new(WireVersion::Qmux01);
    let id = p.client.open(Dir::Uni).unwrap();
    let mut want = Vec::new();
    for i in 0..2000u32 {
        let chunk = Bytes::from(vec![(i % 250) as u8; (i % 37) as usize + 1]);
        want.extend_from_slice(&chunk);
        assert_eq!(p.client.write(id, chunk.clone()), Ok(chunk.len()));
    }
    p.client.finish(id).unwrap();
    p.drive();
    assert_eq!(p.client.send_buffered(), 0);
    let sid = p.server.accept(Dir::Uni).unwrap();
    assert_eq!(read_all(&mut p.server, sid), (want, Ok(())));
}

#[test]
fn uni_streams_and_spec_example_bytes() {
    let mut p = Pair::new(WireVersion::Qmux01);
    let id = p.client.open(Dir::Uni).unwrap();
    assert_eq!(id, StreamId(2));
    p.client
        .write(id, Bytes::from_static(&[1, 4, 1, 3, 1, 2]))
        .unwrap();
    p.drive();
    p.client.finish(id).unwrap();
    p.drive();
    let n = p.client_sent.len();
    assert_eq!(
        p.client_sent[n - 2].as_ref(),
        &[0x0e, 0x02, 0x00, 0x06, 1, 4, 1, 3, 1, 2]
    );
    assert_eq!(p.client_sent[n - 1].as_ref(), &[0x0f, 0x02, 0x06, 0x00]);
    let sid = p.server.accept(Dir::Uni).unwrap();
    assert_eq!(read_all(&mut p.server, sid).0, vec![1, 4, 1, 3, 1, 2]);
}

#[test]
fn flow_control_credit_moves_a_large_transfer_with_bounded_buffers() {
    let mut c = config(WireVersion::Qmux01, Framing::Message, Side::Client);
    let mut s = config(WireVersion::Qmux01, Framing::Message, Side::Server);
    for cfg in [&mut c, &mut s] {
        cfg.max_data = 64 * 1024;
        cfg.max_stream_data_bidi_remote = 16 * 1024;
        cfg.max_stream_data_bidi_local = 16 * 1024;
    }
    let mut p = Pair::with(c, s);
    let id = p.client.open(Dir::Bi).unwrap();
    let total: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut written = 0;
    let mut received = Vec::new();
    let mut sid = None;
    let mut fin = false;
    while !fin {
        if written < total.len() {
            match p
                .client
                .write(id, Bytes::copy_from_slice(&total[written..]))
            {
                Ok(n) => written += n,
                Err(StreamError::Blocked) => {}
                Err(e) => panic!("{e}"),
            }
            if written == total.len() {
                p.client.finish(id).unwrap();
            }
        }
        p.drive();
        assert!(
            p.server.recv_buffered() <= 16 * 1024,
            "bounded by the stream window"
        );
        let sid = *sid.get_or_insert_with(|| p.server.accept(Dir::Bi).unwrap());
        // Read a little at a time, so credit trickles back.
        loop {
            match p.server.read(sid, 5000) {
                Ok(Some(chunk)) => received.extend_from_slice(&chunk),
                Ok(None) => {
                    fin = true;
                    break;
                }
                Err(StreamError::Blocked) => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert_eq!(received, total);
    // MAX_STREAM_DATA and MAX_DATA went out.
    let credit = p
        .server_sent
        .iter()
        .filter(|r| r[0] == 0x11 || r[0] == 0x10)
        .count();
    assert!(credit > 10, "{credit} credit updates");
}

#[test]
fn reset_and_stop_codes_arrive_raw() {
    let mut p = Pair::new(WireVersion::Qmux01);
    let a = p.client.open(Dir::Uni).unwrap();
    p.client.write(a, Bytes::from_static(b"partial")).unwrap();
    p.drive();
    p.client.reset(a, 0x35);
    p.drive();
    let sa = p.server.accept(Dir::Uni).unwrap();
    assert_eq!(p.server.read(sa, 100), Err(StreamError::Reset(0x35)));

    let b = p.client.open(Dir::Uni).unwrap();
    p.client.write(b, Bytes::from_static(b"x")).unwrap();
    p.drive();
    let sb = p.server.accept(Dir::Uni).unwrap();
    p.server.stop(sb, 0x12);
    p.drive();
    assert!(events(&mut p.client).contains(&Event::Writable(b)));
    assert_eq!(p.client.poll_stopped(b), Ok(Some(0x12)));
    assert_eq!(
        p.client.write(b, Bytes::from_static(b"y")),
        Err(StreamError::Closed(b))
    );
    // The stop was answered with RESET_STREAM carrying the same code.
    assert!(p
        .client_sent
        .iter()
        .any(|r| r.as_ref() == [0x04, 0x06, 0x12, 0x01]));
}

#[test]
fn application_close_carries_code_and_reason() {
    let mut p = Pair::new(WireVersion::Qmux01);
    p.client.close(0x15, "no version");
    p.drive();
    assert_eq!(
        p.server.close_reason(),
        Some(&CloseReason::PeerApplication {
            code: 0x15,
            reason: "no version".into()
        })
    );
    assert!(p.client.is_drained() && p.server.is_drained());
    assert!(matches!(
        p.server.open(Dir::Bi),
        Err(StreamError::ConnectionClosed(_))
    ));
}

/// A peer that writes its last bytes and FIN, then closes at once (moq-cli when its input
/// ends): what it sent before the close stays readable, unaccepted streams included, as QUIC
/// keeps it; past it, reads see the close.
#[test]
fn what_arrived_before_the_peers_close_stays_readable() {
    let mut p = Pair::new(WireVersion::Qmux01);
    let done = p.client.open(Dir::Uni).unwrap();
    p.client
        .write(done, Bytes::from_static(b"last group"))
        .unwrap();
    p.client.finish(done).unwrap();
    let open = p.client.open(Dir::Uni).unwrap();
    p.client.write(open, Bytes::from_static(b"cut")).unwrap();
    p.drive();
    p.client.close(0, "input ended");
    p.drive();
    assert!(matches!(
        p.server.close_reason(),
        Some(CloseReason::PeerApplication { .. })
    ));
    let first = p.server.accept(Dir::Uni).expect("accepted after the close");
    assert_eq!(
        read_all(&mut p.server, first),
        (b"last group".to_vec(), Ok(()))
    );
    let second = p.server.accept(Dir::Uni).unwrap();
    let (bytes, end) = read_all(&mut p.server, second);
    assert_eq!(bytes, b"cut");
    assert!(matches!(end, Err(StreamError::ConnectionClosed(_))));
    assert!(p.server.write(second, Bytes::from_static(b"x")).is_err());
}

#[test]
fn pings_are_answered_and_measure_rtt() {
    let mut c = config(WireVersion::Qmux01, Framing::Message, Side::Client);
    c.rtt_interval = Some(Duration::from_secs(1));
    let mut p = Pair::with(
        c,
        config(WireVersion::Qmux01, Framing::Message, Side::Server),
    );
    p.advance(Duration::from_secs(1));
    assert!(p.client.rtt().is_some());
    assert!(p
        .server_sent
        .iter()
        .any(|r| r.starts_with(&[0xf4, 0x8c, 0x67, 0x52, 0x9e, 0xf8, 0xc7, 0xbe])));
}

#[test]
fn the_first_ping_goes_out_at_once() {
    let mut c = config(WireVersion::Qmux01, Framing::Message, Side::Client);
    c.rtt_interval = Some(Duration::from_secs(5));
    let mut p = Pair::with(
        c,
        config(WireVersion::Qmux01, Framing::Message, Side::Server),
    );
    // No time passes: the opening exchange alone measures the round trip.
    p.advance(Duration::ZERO);
    assert!(p.client.rtt().is_some());
}

/// The first ping leaves with the first records, so its round trip can include the peer's
/// start-up; the next one follows soon (200 ms), not a whole interval (5 s) later.
#[test]
fn a_slow_first_round_trip_is_measured_again_soon() {
    let mut c = config(WireVersion::Qmux01, Framing::Message, Side::Client);
    c.rtt_interval = Some(Duration::from_secs(5));
    let start = Instant::now();
    let late = start + Duration::from_millis(50);
    let mut p = Pair {
        client: Connection::new(c, start),
        server: Connection::new(
            config(WireVersion::Qmux01, Framing::Message, Side::Server),
            start,
        ),
        now: late,
        client_sent: Vec::new(),
        server_sent: Vec::new(),
    };
    // The client's first records (its first ping due at once) reach a server that only
    // answers 50 ms later.
    p.client.handle_timeout(start);
    while let Some(r) = p.client.poll_transmit(start) {
        p.server.handle_record(r, late);
    }
    p.drive();
    assert_eq!(p.client.rtt(), Some(Duration::from_millis(50)));
    p.advance(Duration::from_millis(200));
    assert_eq!(p.client.rtt(), Some(Duration::ZERO));
}

#[test]
fn keep_alive_and_idle_timeout() {
    let mut p = Pair::new(WireVersion::Qmux01);
    // Keep-alives every idle/3 keep both sides alive indefinitely.
    for _ in 0..12 {
        p.advance(Duration::from_secs(10));
    }
    assert!(p.client.close_reason().is_none() && p.server.close_reason().is_none());
    // A silent peer: the server stops hearing anything.
    p.now += Duration::from_secs(31);
    p.server.handle_timeout(p.now);
    assert_eq!(p.server.close_reason(), Some(&CloseReason::IdleTimeout));
}

#[test]
fn stream_limit_is_enforced_and_replenished() {
    let mut c = config(WireVersion::Qmux01, Framing::Message, Side::Client);
    let mut s = config(WireVersion::Qmux01, Framing::Message, Side::Server);
    s.max_streams_uni = 2;
    c.max_streams_uni = 2;
    let mut p = Pair::with(c, s);
    let a = p.client.open(Dir::Uni).unwrap();
    let _b = p.client.open(Dir::Uni).unwrap();
    assert_eq!(p.client.open(Dir::Uni), Err(StreamError::Blocked));
    p.client.finish(a).unwrap();
    p.drive();
    let sa = p.server.accept(Dir::Uni).unwrap();
    assert_eq!(p.server.read(sa, 10), Ok(None));
    p.drive();
    assert!(events(&mut p.client).contains(&Event::StreamsAvailable(Dir::Uni)));
    assert!(p.client.open(Dir::Uni).is_ok());

    // A peer that ignores MAX_STREAMS: stream index 3 (id 14) exceeds the limit of 3.
    p.inject_to_server(&[Frame::Stream(StreamFrame {
        id: StreamId::new(3, Dir::Uni, Side::Client),
        offset: Some(0),
        data: Bytes::from_static(b"x"),
        fin: false,
        explicit_len: true,
    })]);
    assert_eq!(
        transport_close(&p.server),
        TransportCode::STREAM_LIMIT_ERROR
    );
    assert!(matches!(
        p.client.close_reason(),
        Some(CloseReason::PeerTransport { code, .. }) if *code == TransportCode::STREAM_LIMIT_ERROR
    ));
}

#[test]
fn data_limits_are_enforced() {
    // Beyond the stream window.
    let mut p = Pair::new(WireVersion::Qmux01);
    p.inject_to_server(&[Frame::Stream(StreamFrame {
        id: StreamId(2),
        offset: Some(262_144),
        data: Bytes::from_static(b"x"),
        fin: false,
        explicit_len: true,
    })]);
    assert_eq!(
        transport_close(&p.server),
        TransportCode::FLOW_CONTROL_ERROR
    );

    // Beyond the connection window: five streams of 256 KiB exceed 1 MiB.
    let mut p = Pair::new(WireVersion::Qmux01);
    let chunk = Bytes::from(vec![7u8; 16_000]);
    'outer: for s in 0..5u64 {
        for k in 0..16u64 {
            p.inject_to_server(&[Frame::Stream(StreamFrame {
                id: StreamId::new(s, Dir::Uni, Side::Client),
                offset: Some(k * 16_000),
                data: chunk.clone(),
                fin: false,
                explicit_len: true,
            })]);
            if p.server.close_reason().is_some() {
                break 'outer;
            }
        }
    }
    assert_eq!(
        transport_close(&p.server),
        TransportCode::FLOW_CONTROL_ERROR
    );
}

#[test]
fn malformed_unknown_and_oversized_input_closes() {
    let mut p = Pair::new(WireVersion::Qmux01);
    p.server
        .handle_record(Bytes::from_static(&[0x21, 0x00]), p.now);
    assert_eq!(
        transport_close(&p.server),
        TransportCode::FRAME_ENCODING_ERROR
    );
    p.drive();
    assert!(matches!(
        p.client.close_reason(),
        Some(CloseReason::PeerTransport { .. })
    ));

    let mut p = Pair::new(WireVersion::Qmux01);
    p.server
        .handle_record(Bytes::from_static(&[0x0e, 0x02, 0x00, 0x09, 0x01]), p.now);
    assert_eq!(
        transport_close(&p.server),
        TransportCode::FRAME_ENCODING_ERROR
    );

    let mut p = Pair::new(WireVersion::Qmux01);
    p.server
        .handle_record(Bytes::from(vec![0u8; 16_383]), p.now);
    assert_eq!(
        transport_close(&p.server),
        TransportCode::PROTOCOL_VIOLATION
    );

    // A second transport-parameter frame.
    let mut p = Pair::new(WireVersion::Qmux01);
    let params = p.client.local_params().clone();
    p.inject_to_server(&[Frame::TransportParameters(params)]);
    assert_eq!(
        transport_close(&p.server),
        TransportCode::PROTOCOL_VIOLATION
    );

    // A frame on a stream of ours that was never opened.
    let mut p = Pair::new(WireVersion::Qmux01);
    p.inject_to_server(&[Frame::MaxStreamData {
        id: StreamId(1),
        max: 5,
    }]);
    assert_eq!(
        transport_close(&p.server),
        TransportCode::STREAM_STATE_ERROR
    );
}

#[test]
fn qmux02_requires_parameters_first() {
    let now = Instant::now();
    let mut server = Connection::new(
        config(WireVersion::Qmux02, Framing::Message, Side::Server),
        now,
    );
    server.handle_record(Frame::MaxData(5).to_bytes(), now);
    assert_eq!(transport_close(&server), TransportCode::PROTOCOL_VIOLATION);
    // qmux-01 tolerates it.
    let mut server = Connection::new(
        config(WireVersion::Qmux01, Framing::Message, Side::Server),
        now,
    );
    server.handle_record(Frame::MaxData(5).to_bytes(), now);
    assert!(server.close_reason().is_none());
    // qmux-02 advertises and accepts RESET_STREAM_AT.
    let mut p = Pair::new(WireVersion::Qmux02);
    assert!(p.server.local_params().reset_stream_at);
    p.inject_to_server(&[Frame::ResetStreamAt {
        id: StreamId(2),
        code: 9,
        final_size: 0,
        reliable_size: 0,
    }]);
    let sid = p.server.accept(Dir::Uni).unwrap();
    assert_eq!(p.server.read(sid, 1), Err(StreamError::Reset(9)));
    let mut p = Pair::new(WireVersion::Qmux01);
    p.inject_to_server(&[Frame::ResetStreamAt {
        id: StreamId(2),
        code: 9,
        final_size: 0,
        reliable_size: 0,
    }]);
    assert_eq!(
        transport_close(&p.server),
        TransportCode::PROTOCOL_VIOLATION
    );
}

#[test]
fn priority_order_then_round_robin() {
    let mut p = Pair::new(WireVersion::Qmux01);
    let low = p.client.open(Dir::Uni).unwrap();
    let high = p.client.open(Dir::Uni).unwrap();
    let peer = p.client.open(Dir::Uni).unwrap();
    p.client.set_priority(high, 10);
    p.client.set_priority(peer, 10);
    for id in [low, high, peer] {
        p.client.write(id, Bytes::from(vec![1u8; 40_000])).unwrap();
    }
    let mut order = Vec::new();
    while let Some(record) = p.client.poll_transmit(p.now) {
        let mut rest = record.clone();
        while !rest.is_empty() {
            if let Frame::Stream(s) = Frame::decode(&mut rest).unwrap() {
                order.push(s.id);
            }
        }
        p.server.handle_record(record, p.now);
    }
    let first_low = order.iter().position(|id| *id == low).unwrap();
    assert!(order[..first_low].iter().all(|id| *id != low));
    assert!(order[first_low..].iter().all(|id| *id == low), "{order:?}");
    // The two equal streams alternate frame by frame.
    assert_eq!(&order[..4], &[high, peer, high, peer]);
}

#[test]
fn byte_stream_framing_and_in_band_alpn() {
    let c = config(WireVersion::Qmux01, Framing::ByteStream, Side::Client)
        .with_application_protocols(&["moq-lite-05", "moq-lite-06"]);
    let s = config(WireVersion::Qmux01, Framing::ByteStream, Side::Server)
        .with_application_protocols(&["moq-lite-06", "moq-lite-05"]);
    let mut p = Pair::with(c, s);
    assert_eq!(p.client.protocol(), Some("moq-lite-06"));
    assert_eq!(p.server.protocol(), Some("moq-lite-06"));
    let id = p.client.open(Dir::Uni).unwrap();
    p.client.write(id, Bytes::from(vec![3u8; 50_000])).unwrap();
    p.client.finish(id).unwrap();
    // Deliver the client's bytes one small slice at a time.
    let mut bytes = Vec::new();
    while let Some(r) = p.client.poll_transmit(p.now) {
        bytes.extend_from_slice(&r);
    }
    for piece in bytes.chunks(7) {
        p.server.handle_bytes(piece, p.now);
    }
    let sid = p.server.accept(Dir::Uni).unwrap();
    assert_eq!(read_all(&mut p.server, sid).0.len(), 50_000);

    // application_protocols over WebSocket is a transport-parameter error.
    let c = config(WireVersion::Qmux01, Framing::Message, Side::Client)
        .with_application_protocols(&["moq-lite-06"]);
    let p = Pair::with(
        c,
        config(WireVersion::Qmux01, Framing::Message, Side::Server),
    );
    assert_eq!(
        transport_close(&p.server),
        TransportCode::TRANSPORT_PARAMETER_ERROR
    );
}

#[test]
fn qmux00_one_frame_per_message_no_datagrams() {
    let mut p = Pair::new(WireVersion::Qmux00);
    assert_eq!(p.client.max_datagram_size(), 0);
    let id = p.client.open(Dir::Bi).unwrap();
    p.client.write(id, Bytes::from_static(b"abc")).unwrap();
    p.client.finish(id).unwrap();
    p.drive();
    let sid = p.server.accept(Dir::Bi).unwrap();
    assert_eq!(read_all(&mut p.server, sid).0, b"abc");
    assert!(p.client_sent.iter().skip(1).all(|r| {
        let mut r = r.clone();
        Frame::decode(&mut r).unwrap();
        r.is_empty()
    }));
}

#[test]
fn datagrams_flow_on_qmux01() {
    let mut p = Pair::new(WireVersion::Qmux01);
    let max = p.client.max_datagram_size();
    assert!(max > 16_000);
    p.client.send_datagram(Bytes::from_static(b"dg")).unwrap();
    assert_eq!(
        p.client.send_datagram(Bytes::from(vec![0; max + 1])),
        Err(StreamError::DatagramUnsupported)
    );
    p.drive();
    assert_eq!(p.server.recv_datagram().as_deref(), Some(&b"dg"[..]));
}

/// A writer refused for want of send-buffer room is told it may write again when the peer's
/// STOP_SENDING discards what filled the buffer, though nothing more is ever sent that would
/// wake it otherwise.
#[test]
fn a_stop_that_frees_the_send_buffer_wakes_the_writer_it_blocked() {
    let mut client = config(WireVersion::Qmux01, Framing::Message, Side::Client);
    client.send_buffer = 64 * 1024;
    // The server's credit lets almost nothing through, so what is written stays queued.
    let mut server = config(WireVersion::Qmux01, Framing::Message, Side::Server);
    server.max_data = 1024;
    let mut p = Pair::with(client, server);
    let filled = p.client.open(Dir::Uni).unwrap();
    let mut written = 0;
    while let Ok(n) = p.client.write(filled, Bytes::from(vec![1u8; 16 * 1024])) {
        written += n;
    }
    assert!(written >= 48 * 1024, "{written}");
    let blocked = p.client.open(Dir::Uni).unwrap();
    assert_eq!(
        p.client.write(blocked, Bytes::from_static(b"next")),
        Err(StreamError::Blocked)
    );
    p.drive();
    while p.client.poll_event().is_some() {}
    let sid = p.server.accept(Dir::Uni).unwrap();
    p.server.stop(sid, 7);
    p.drive();
    let mut events = Vec::new();
    while let Some(event) = p.client.poll_event() {
        events.push(event);
    }
    assert!(
        events.contains(&Event::Writable(blocked)),
        "the blocked writer is woken: {events:?}"
    );
    assert_eq!(p.client.write(blocked, Bytes::from_static(b"next")), Ok(4));
}
