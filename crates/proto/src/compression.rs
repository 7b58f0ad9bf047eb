//! lite-07 announce compression (docs/wire.md §4.4): an ANNOUNCE_START may copy the head of a
//! live announcement's path, and an ANNOUNCE_START or ANNOUNCE_UPDATE the tail of a live
//! announcement's hop chain, naming that *base* by its distance back from the stream's next
//! unassigned announce id (1 = the latest START; 0 = no base).
//!
//! [`CompressedAnnouncement`] is the stateless wire form, with its references as they travel
//! (lite-06's typed announcement with [`PathRef`] and [`HopsRef`] for its fields).
//! [`AnnounceDecoder`] resolves them against the live announcements of one received stream,
//! refusing every violation (a base not live or never assigned, a keep longer than the base,
//! a resolved path over 32 segments or a chain breaking the hop rules) with
//! [`DecodeError::InvalidReference`], which is session-fatal. [`AnnounceEncoder`] picks the
//! bases for one sent stream: the live announcement sharing the longest path head (and,
//! separately, the longest chain tail), the newest among equals, used only when the reference
//! encodes shorter than the literal. Both work in [`Announcement`]s, with implicit ids as on
//! lite-06, so the session above sees one model of the announce stream for 06 and 07.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;

use crate::announce::{AnnounceField, Announcement, TypedAnnouncement};
use crate::coding::{self, DecodeError, EncodeError};
use crate::hops::Hops;
use crate::limits::MAX_PATH_SEGMENTS;
use crate::path::Path;
use crate::varint;
use crate::version::Version;

/// `Base(i), Keep(i), Rest Path(s)`: the first `keep` segments of the base's path, then `rest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRef {
    pub base: u64,
    pub keep: u64,
    pub rest: Path,
}

impl PathRef {
    /// A path with no base.
    pub fn literal(path: Path) -> PathRef {
        PathRef {
            base: 0,
            keep: 0,
            rest: path,
        }
    }
}

/// `Base(i), Literal Hops, Keep(i)`: `literal`, then the last `keep` hops of the base's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopsRef {
    pub base: u64,
    pub literal: Hops,
    pub keep: u64,
}

impl HopsRef {
    /// A chain with no base.
    pub fn literal(hops: Hops) -> HopsRef {
        HopsRef {
            base: 0,
            literal: hops,
            keep: 0,
        }
    }
}

/// A lite-07 typed announcement as it travels: its path and chain as references.
pub type CompressedAnnouncement = TypedAnnouncement<PathRef, HopsRef>;

fn read_ref(r: &mut &[u8], version: Version) -> Result<(u64, u64), DecodeError> {
    Ok((
        coding::read_varint(r, version)?,
        coding::read_varint(r, version)?,
    ))
}

fn check_no_base_keeps_nothing(base: u64, keep: u64) -> Result<(), DecodeError> {
    if base == 0 && keep != 0 {
        return Err(DecodeError::InvalidValue("a keep without a base"));
    }
    Ok(())
}

fn refuse_keep_without_base(base: u64, keep: u64) -> Result<(), EncodeError> {
    if base == 0 && keep != 0 {
        return Err(EncodeError::InvalidValue("a keep without a base"));
    }
    Ok(())
}

impl AnnounceField for PathRef {
    const COMPRESSED: bool = true;

    fn encode_field(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        refuse_keep_without_base(self.base, self.keep)?;
        coding::write_varint(w, self.base, version)?;
        coding::write_varint(w, self.keep, version)?;
        self.rest.encode(w, version)
    }

    fn decode_field(r: &mut &[u8], version: Version) -> Result<PathRef, DecodeError> {
        let (base, keep) = read_ref(r, version)?;
        check_no_base_keeps_nothing(base, keep)?;
        let rest = Path::decode(r, version)?;
        Ok(PathRef { base, keep, rest })
    }
}

impl AnnounceField for HopsRef {
    const COMPRESSED: bool = true;

    fn encode_field(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        refuse_keep_without_base(self.base, self.keep)?;
        coding::write_varint(w, self.base, version)?;
        self.literal.encode(w, version)?;
        coding::write_varint(w, self.keep, version)
    }

    fn decode_field(r: &mut &[u8], version: Version) -> Result<HopsRef, DecodeError> {
        let base = coding::read_varint(r, version)?;
        let literal = Hops::decode(r, version)?;
        let keep = coding::read_varint(r, version)?;
        check_no_base_keeps_nothing(base, keep)?;
        Ok(HopsRef {
            base,
            literal,
            keep,
        })
    }
}

/// A live announcement as both ends hold it: its wire suffix and wire chain.
#[derive(Debug, Clone)]
struct Entry {
    suffix: Path,
    hops: Hops,
}

/// The live announcements of one stream by id, which is all a base can name.
#[derive(Debug, Default)]
struct Live {
    next: u64,
    entries: HashMap<u64, Entry>,
}

fn invalid(why: &'static str) -> DecodeError {
    DecodeError::InvalidReference(why)
}

impl Live {
    /// The live announcement `distance` back from the next id; `None` for distance 0.
    fn base(&self, distance: u64) -> Result<Option<&Entry>, DecodeError> {
        if distance == 0 {
            return Ok(None);
        }
        let id = self
            .next
            .checked_sub(distance)
            .ok_or(invalid("a base never assigned"))?;
        self.entries
            .get(&id)
            .map(Some)
            .ok_or(invalid("a base no longer live"))
    }

    fn resolve_path(&self, path: PathRef) -> Result<Path, DecodeError> {
        let Some(base) = self.base(path.base)? else {
            return Ok(path.rest);
        };
        let keep = usize::try_from(path.keep).unwrap_or(usize::MAX);
        if keep > base.suffix.len_segments() {
            return Err(invalid("a path keep past the base"));
        }
        let head: Vec<&str> = base.suffix.segments().take(keep).collect();
        let head = Path::new(&head.join("/")).map_err(|_| invalid("a path past 32 segments"))?;
        if head.len_segments() + path.rest.len_segments() > MAX_PATH_SEGMENTS {
            return Err(invalid("a path past 32 segments"));
        }
        head.join(&path.rest)
            .map_err(|_| invalid("a path past its bounds"))
    }

    fn resolve_hops(&self, hops: HopsRef) -> Result<Hops, DecodeError> {
        let Some(base) = self.base(hops.base)? else {
            return Ok(hops.literal);
        };
        let tail = base.hops.as_slice();
        let keep = usize::try_from(hops.keep).unwrap_or(usize::MAX);
        let start = tail
            .len()
            .checked_sub(keep)
            .ok_or(invalid("a hop keep past the base"))?;
        let mut out = hops.literal;
        for &hop in &tail[start..] {
            out.push(hop)
                .map_err(|_| invalid("a resolved chain breaking the hop rules"))?;
        }
        Ok(out)
    }
}

/// Resolves the references of one received lite-07 announce stream.
#[derive(Debug, Default)]
pub struct AnnounceDecoder {
    live: Live,
}

impl AnnounceDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The announcement `msg` names, resolved; the stream's live set follows it (a START takes
    /// the next id, an UPDATE replaces its chain after resolving against the old one, an END
    /// retires its id). An END or UPDATE for an id not live is refused too.
    pub fn resolve(&mut self, msg: CompressedAnnouncement) -> Result<Announcement, DecodeError> {
        Ok(match msg {
            CompressedAnnouncement::Start { suffix, hops, cost } => {
                let suffix = self.live.resolve_path(suffix)?;
                let hops = self.live.resolve_hops(hops)?;
                let id = self.live.next;
                self.live.next += 1;
                self.live.entries.insert(
                    id,
                    Entry {
                        suffix: suffix.clone(),
                        hops: hops.clone(),
                    },
                );
                Announcement::Start { suffix, hops, cost }
            }
            CompressedAnnouncement::Update { id, hops, cost } => {
                let hops = self.live.resolve_hops(hops)?;
                let entry = self
                    .live
                    .entries
                    .get_mut(&id)
                    .ok_or(invalid("an update of an id not live"))?;
                entry.hops = hops.clone();
                Announcement::Update { id, hops, cost }
            }
            CompressedAnnouncement::End { id } => {
                self.live
                    .entries
                    .remove(&id)
                    .ok_or(invalid("an end of an id not live"))?;
                Announcement::End { id }
            }
            CompressedAnnouncement::Unknown { kind } => Announcement::Unknown { kind },
        })
    }
}

/// The ids of the live entries beneath each run of keys (path segments from the head, or hop
/// ids from the tail), so the entry sharing the longest run with a query is found by walking
/// the query down once.
#[derive(Debug)]
struct Trie<K> {
    children: HashMap<K, Node<K>>,
}

#[derive(Debug)]
struct Node<K> {
    ids: BTreeSet<u64>,
    children: HashMap<K, Node<K>>,
}

impl<K> Default for Trie<K> {
    fn default() -> Self {
        Trie {
            children: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> Trie<K> {
    fn insert(&mut self, keys: impl Iterator<Item = K>, id: u64) {
        let mut children = &mut self.children;
        for key in keys {
            let node = children.entry(key).or_insert_with(|| Node {
                ids: BTreeSet::new(),
                children: HashMap::new(),
            });
            node.ids.insert(id);
            children = &mut node.children;
        }
    }

    fn remove(&mut self, keys: impl Iterator<Item = K>, id: u64) {
        let mut children = &mut self.children;
        for key in keys {
            let Some(node) = children.get_mut(&key) else {
                return;
            };
            node.ids.remove(&id);
            if node.ids.is_empty() {
                // Nothing else passes through here, so nothing lies beneath it either.
                children.remove(&key);
                return;
            }
            children = &mut children.get_mut(&key).expect("just found").children;
        }
    }

    /// How many leading keys the query shares with its closest entry, and that entry's id
    /// (the newest among equals: the shortest distance to write).
    fn longest(&self, keys: impl Iterator<Item = K>) -> Option<(usize, u64)> {
        let mut children = &self.children;
        let mut best = None;
        for (depth, key) in keys.enumerate() {
            let Some(node) = children.get(&key) else {
                break;
            };
            let newest = *node.ids.last().expect("a node without ids is pruned");
            best = Some((depth + 1, newest));
            children = &node.children;
        }
        best
    }
}

/// Picks the references of one sent lite-07 announce stream.
#[derive(Debug)]
pub struct AnnounceEncoder {
    version: Version,
    live: Live,
    heads: Trie<String>,
    tails: Trie<u64>,
}

fn segments(path: &Path) -> impl Iterator<Item = String> + '_ {
    path.segments().map(str::to_string)
}

fn reversed(hops: &Hops) -> impl Iterator<Item = u64> + '_ {
    hops.as_slice().iter().rev().copied()
}

impl AnnounceEncoder {
    pub fn new(version: Version) -> Self {
        AnnounceEncoder {
            version,
            live: Live::default(),
            heads: Trie::default(),
            tails: Trie::default(),
        }
    }

    /// The wire form of `msg`, the live set following it. An END or UPDATE for an id this
    /// stream has not announced (or already ended) is refused.
    pub fn compress(&mut self, msg: &Announcement) -> Result<CompressedAnnouncement, EncodeError> {
        Ok(match msg {
            Announcement::Start { suffix, hops, cost } => {
                let id = self.live.next;
                self.live.next += 1;
                // Distances count back from the id this START takes.
                let path = self.path_ref(suffix, id)?;
                let chain = self.hops_ref(hops, id)?;
                self.heads.insert(segments(suffix), id);
                self.tails.insert(reversed(hops), id);
                self.live.entries.insert(
                    id,
                    Entry {
                        suffix: suffix.clone(),
                        hops: hops.clone(),
                    },
                );
                CompressedAnnouncement::Start {
                    suffix: path,
                    hops: chain,
                    cost: *cost,
                }
            }
            Announcement::Update { id, hops, cost } => {
                if !self.live.entries.contains_key(id) {
                    return Err(EncodeError::InvalidValue("an update of an id not live"));
                }
                // The decoder resolves against the chain this replaces: a valid base.
                let chain = self.hops_ref(hops, self.live.next)?;
                let entry = self.live.entries.get_mut(id).expect("checked live");
                self.tails.remove(reversed(&entry.hops), *id);
                self.tails.insert(reversed(hops), *id);
                entry.hops = hops.clone();
                CompressedAnnouncement::Update {
                    id: *id,
                    hops: chain,
                    cost: *cost,
                }
            }
            Announcement::End { id } => {
                let entry = self
                    .live
                    .entries
                    .remove(id)
                    .ok_or(EncodeError::InvalidValue("an end of an id not live"))?;
                self.heads.remove(segments(&entry.suffix), *id);
                self.tails.remove(reversed(&entry.hops), *id);
                CompressedAnnouncement::End { id: *id }
            }
            Announcement::Unknown { kind } => CompressedAnnouncement::Unknown { kind: *kind },
        })
    }

    fn len(&self, v: u64) -> Result<usize, EncodeError> {
        Ok(varint::encoded_len_as(self.version.varint(), v)?)
    }

    fn path_len(&self, path: &Path) -> Result<usize, EncodeError> {
        Ok(self.len(path.as_str().len() as u64)? + path.as_str().len())
    }

    fn chain_len(&self, hops: &[u64]) -> Result<usize, EncodeError> {
        let mut n = self.len(hops.len() as u64)?;
        for &hop in hops {
            n += self.len(hop)?;
        }
        Ok(n)
    }

    fn path_ref(&self, suffix: &Path, next: u64) -> Result<PathRef, EncodeError> {
        let Some((keep, id)) = self.heads.longest(segments(suffix)) else {
            return Ok(PathRef::literal(suffix.clone()));
        };
        let rest: Vec<&str> = suffix.segments().skip(keep).collect();
        let rest = Path::new(&rest.join("/")).expect("a tail of a valid path is valid");
        let base = next - id;
        let referenced = self.len(base)? + self.len(keep as u64)? + self.path_len(&rest)?;
        let literal = 2 * self.len(0)? + self.path_len(suffix)?;
        Ok(if referenced < literal {
            PathRef {
                base,
                keep: keep as u64,
                rest,
            }
        } else {
            PathRef::literal(suffix.clone())
        })
    }

    fn hops_ref(&self, hops: &Hops, next: u64) -> Result<HopsRef, EncodeError> {
        let Some((keep, id)) = self.tails.longest(reversed(hops)) else {
            return Ok(HopsRef::literal(hops.clone()));
        };
        let head = &hops.as_slice()[..hops.len() - keep];
        let base = next - id;
        let referenced = self.len(base)? + self.chain_len(head)? + self.len(keep as u64)?;
        let literal = 2 * self.len(0)? + self.chain_len(hops.as_slice())?;
        Ok(if referenced < literal {
            HopsRef {
                base,
                literal: Hops::from_vec(head.to_vec()).expect("a prefix of a valid chain"),
                keep: keep as u64,
            }
        } else {
            HopsRef::literal(hops.clone())
        })
    }
}
