//! The community's shape: its channels, which of them each member reads, what each member's
//! token grants, and which members are removed mid-run.
//!
//! A community is the path prefix `c/<id>`; sessions dial it, so broadcast paths inside a
//! session are relative to it: open channels `open/<n>`, members-only channels
//! `member/<n>`, each with one track, `chat`. Every assignment is a pure function of the
//! member's index, so runs are repeatable and spread evenly: member `i`'s open channels are
//! `i·k_open … i·k_open + k_open - 1` (mod the open channel count), and likewise for its
//! members-only channels.

/// The one track every channel carries.
pub const TRACK: &str = "chat";

/// Which kind of channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelKind {
    /// Granted to every member by one pattern (`open/**`).
    Open,
    /// Granted per member, each by name (`member/<n>`).
    Member,
}

/// One channel of the community.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Channel {
    pub kind: ChannelKind,
    pub index: usize,
}

impl Channel {
    pub fn open(index: usize) -> Self {
        Channel {
            kind: ChannelKind::Open,
            index,
        }
    }

    pub fn member(index: usize) -> Self {
        Channel {
            kind: ChannelKind::Member,
            index,
        }
    }

    /// The broadcast's path relative to the community root.
    pub fn path(&self) -> String {
        match self.kind {
            ChannelKind::Open => format!("open/{}", self.index),
            ChannelKind::Member => format!("member/{}", self.index),
        }
    }
}

/// The community's channel counts and each member's share of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub open_channels: usize,
    pub member_channels: usize,
    /// Open channels each member reads.
    pub open_per_member: usize,
    /// Members-only channels each member reads.
    pub member_per_member: usize,
}

impl Layout {
    /// Every channel, open ones first (the publisher's order).
    pub fn channels(&self) -> impl Iterator<Item = Channel> + '_ {
        (0..self.open_channels)
            .map(Channel::open)
            .chain((0..self.member_channels).map(Channel::member))
    }

    pub fn channel_count(&self) -> usize {
        self.open_channels + self.member_channels
    }

    /// The position of `channel` in [`Layout::channels`].
    pub fn position(&self, channel: Channel) -> usize {
        match channel.kind {
            ChannelKind::Open => channel.index,
            ChannelKind::Member => self.open_channels + channel.index,
        }
    }

    /// The channels member `member` reads: its open channels, then its members-only ones.
    /// Never the same channel twice (a member reads at most every channel of a kind).
    pub fn channels_of(&self, member: usize) -> Vec<Channel> {
        let pick = |count: usize, per: usize, make: fn(usize) -> Channel| {
            let per = per.min(count);
            (0..per).map(move |j| make((member * per + j) % count))
        };
        pick(self.open_channels, self.open_per_member, Channel::open)
            .chain(pick(
                self.member_channels,
                self.member_per_member,
                Channel::member,
            ))
            .collect()
    }

    /// What member `member`'s token may subscribe to, relative to the community root: every
    /// open channel by one pattern, and each of its members-only channels by name.
    pub fn subscribe_patterns(&self, member: usize) -> Vec<String> {
        let mut patterns = vec!["open/**".to_string()];
        patterns.extend(
            self.channels_of(member)
                .into_iter()
                .filter(|c| c.kind == ChannelKind::Member)
                .map(|c| c.path()),
        );
        patterns
    }
}

/// Which members are removed mid-run: `removed` of `members`, spread evenly over the start
/// order (so over the transports too). Member `i` is removed when `i % stride == stride - 1`
/// with `stride = members / removed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Removal {
    stride: usize,
    count: usize,
}

impl Removal {
    pub fn new(members: usize, removed: usize) -> Self {
        let count = removed.min(members);
        let stride = members.checked_div(count).unwrap_or(0);
        Removal { stride, count }
    }

    pub fn is_removed(&self, member: usize) -> bool {
        self.stride > 0
            && member % self.stride == self.stride - 1
            && member / self.stride < self.count
    }

    pub fn count(&self) -> usize {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn layout() -> Layout {
        Layout {
            open_channels: 10,
            member_channels: 6,
            open_per_member: 3,
            member_per_member: 2,
        }
    }

    #[test]
    fn a_member_reads_its_mix_of_open_and_members_only_channels() {
        let layout = layout();
        for member in 0..50 {
            let channels = layout.channels_of(member);
            let open = channels.iter().filter(|c| c.kind == ChannelKind::Open);
            let only = channels.iter().filter(|c| c.kind == ChannelKind::Member);
            assert_eq!(open.count(), 3, "member {member}");
            assert_eq!(only.count(), 2, "member {member}");
            let distinct: HashSet<_> = channels.iter().collect();
            assert_eq!(
                distinct.len(),
                channels.len(),
                "member {member} repeats a channel"
            );
        }
    }

    #[test]
    fn readers_spread_evenly_over_the_channels() {
        let layout = layout();
        let members = 60; // a whole number of rounds of both kinds
        let mut readers: HashMap<Channel, usize> = HashMap::new();
        for member in 0..members {
            for channel in layout.channels_of(member) {
                *readers.entry(channel).or_default() += 1;
            }
        }
        assert_eq!(readers.len(), layout.channel_count());
        for (channel, n) in readers {
            let expected = match channel.kind {
                ChannelKind::Open => members * 3 / 10,
                ChannelKind::Member => members * 2 / 6,
            };
            assert_eq!(n, expected, "{channel:?}");
        }
    }

    #[test]
    fn a_member_reads_no_more_channels_than_exist() {
        let layout = Layout {
            open_channels: 2,
            member_channels: 1,
            open_per_member: 5,
            member_per_member: 5,
        };
        assert_eq!(layout.channels_of(7).len(), 3);
    }

    #[test]
    fn a_token_names_open_by_pattern_and_each_members_only_channel() {
        let layout = layout();
        let patterns = layout.subscribe_patterns(4);
        assert_eq!(patterns, vec!["open/**", "member/2", "member/3"]);
        // Every channel the member reads is covered, and no other members-only channel.
        for channel in layout.channels_of(4) {
            let path = channel.path();
            assert!(
                patterns.iter().any(|p| p == &path
                    || p.strip_suffix("/**")
                        .is_some_and(|pre| path.starts_with(pre))),
                "{path} not granted"
            );
        }
    }

    #[test]
    fn positions_follow_the_publisher_order() {
        let layout = layout();
        for (position, channel) in layout.channels().enumerate() {
            assert_eq!(layout.position(channel), position);
        }
    }

    #[test]
    fn removal_picks_the_asked_count_spread_over_the_order() {
        let removal = Removal::new(100, 7);
        let removed: Vec<usize> = (0..100).filter(|&m| removal.is_removed(m)).collect();
        assert_eq!(removed.len(), 7);
        // Spread: consecutive removed members are a stride apart.
        assert!(removed.windows(2).all(|w| w[1] - w[0] == 100 / 7));
        assert!((0..100).all(|m| !Removal::new(100, 0).is_removed(m)));
        assert_eq!(
            (0..5).filter(|&m| Removal::new(5, 9).is_removed(m)).count(),
            5
        );
    }
}
