//! How one announce stream we serve puts its announcements on the wire, per version
//! (docs/wire.md §4.3–4.4, §6):
//!
//! | version | opening | a route appears | its route changes | it goes |
//! |---|---|---|---|---|
//! | 01/02 | ANNOUNCE_INIT (the live suffixes) | ANNOUNCE Active (no hops) | nothing | ANNOUNCE Ended |
//! | 03/04 | nothing | ANNOUNCE Active, our hop appended to the chain (03: its length only) | nothing | ANNOUNCE Ended |
//! | 05 | ANNOUNCE_OK (our hop, the count) | ANNOUNCE Active | ANNOUNCE Active again (a restart) | ANNOUNCE Ended |
//! | 06 | ANNOUNCE_OK | START | UPDATE | END |
//! | 07 | ANNOUNCE_OK | START, compressed | UPDATE, compressed | END |
//!
//! Before 05 no ANNOUNCE_OK names us, so the sender appends its own hop to each chain: a route
//! whose chain already holds our hop (a reflection), or that has no room for it, is not sent.

use starling_model::Announced;
use starling_proto::{
    Announce, AnnounceEncoder, AnnounceInit, AnnounceOk, AnnounceStatus, Announcement, Hops, Path,
    Version,
};
use starling_transport::SendStream;

use crate::error::Error;
use crate::writer::Writer;

/// One served announce stream's encoder state.
pub(crate) struct AnnounceWire {
    version: Version,
    /// Our hop: named in ANNOUNCE_OK from 05, appended to every chain before it.
    hop: u64,
    /// lite-07 compresses against the announcements still live.
    encoder: Option<AnnounceEncoder>,
}

impl AnnounceWire {
    pub(crate) fn new(version: Version, hop: u64) -> Self {
        AnnounceWire {
            version,
            hop,
            encoder: version
                .has_announce_compression()
                .then(|| AnnounceEncoder::new(version)),
        }
    }

    /// The chain as sent: before 05, with our hop appended; `None` when it cannot be sent (a
    /// reflection, or no room for our hop).
    pub(crate) fn chain(&self, announced: &Announced) -> Option<Hops> {
        let mut hops = Hops::from_vec(announced.route.hops.to_vec()).ok()?;
        if self.version.sender_appends_hop() {
            if hops.contains(self.hop) {
                return None;
            }
            hops.push(self.hop).ok()?;
        }
        Some(hops)
    }

    /// The stream's opening, for the suffixes live now (in the order their STARTs follow).
    pub(crate) fn open<S: SendStream>(
        &self,
        writer: &mut Writer<S>,
        live: &[Path],
    ) -> Result<(), Error> {
        if self.version.has_announce_ok() {
            writer.queue(&AnnounceOk {
                hop: self.hop,
                active_count: live.len() as u64,
            })
        } else if self.version.has_announce_init() {
            writer.queue(&AnnounceInit {
                suffixes: live.to_vec(),
            })
        } else {
            Ok(())
        }
    }

    /// A route appeared (or, within [`open`]'s batch on 01/02, was listed already).
    pub(crate) fn start<S: SendStream>(
        &mut self,
        writer: &mut Writer<S>,
        suffix: &Path,
        hops: Hops,
        announced: &Announced,
        opening: bool,
    ) -> Result<(), Error> {
        tracing::trace!(hop = self.hop, %suffix, ?hops, cost = ?announced.route.cost, "announce start");
        if self.version.has_announce_id() {
            let start = Announcement::Start {
                suffix: suffix.clone(),
                hops,
                cost: announced.route.cost,
            };
            return self.typed(writer, &start);
        }
        if opening && self.version.has_announce_init() {
            // ANNOUNCE_INIT named it already.
            return Ok(());
        }
        writer.queue(&Announce {
            status: AnnounceStatus::Active,
            suffix: suffix.clone(),
            hops: if self.version.has_hops() {
                hops
            } else {
                Hops::new()
            },
        })
    }

    /// A live route's chain or cost changed.
    pub(crate) fn update<S: SendStream>(
        &mut self,
        writer: &mut Writer<S>,
        suffix: &Path,
        id: u64,
        hops: Hops,
        announced: &Announced,
    ) -> Result<(), Error> {
        tracing::trace!(hop = self.hop, %suffix, ?hops, cost = ?announced.route.cost, "announce update");
        if self.version.has_announce_id() {
            let update = Announcement::Update {
                id,
                hops,
                cost: announced.route.cost,
            };
            return self.typed(writer, &update);
        }
        if self.version.restart_supported() {
            // lite-05: a second Active for a live path is a restart.
            return writer.queue(&Announce {
                status: AnnounceStatus::Active,
                suffix: suffix.clone(),
                hops,
            });
        }
        // Before 05 there is no way to say it: the peer keeps the chain it was told.
        Ok(())
    }

    /// A live route went.
    pub(crate) fn end<S: SendStream>(
        &mut self,
        writer: &mut Writer<S>,
        suffix: &Path,
        id: u64,
    ) -> Result<(), Error> {
        tracing::trace!(hop = self.hop, %suffix, "announce end");
        if self.version.has_announce_id() {
            return self.typed(writer, &Announcement::End { id });
        }
        writer.queue(&Announce {
            status: AnnounceStatus::Ended,
            suffix: suffix.clone(),
            hops: Hops::new(),
        })
    }

    /// Whether a change of a live route's chain or cost can be told at all.
    pub(crate) fn tells_updates(&self) -> bool {
        self.version.restart_supported()
    }

    fn typed<S: SendStream>(
        &mut self,
        writer: &mut Writer<S>,
        announcement: &Announcement,
    ) -> Result<(), Error> {
        match &mut self.encoder {
            Some(encoder) => writer.queue_typed(&encoder.compress(announcement)?),
            None => writer.queue_typed(announcement),
        }
    }
}
