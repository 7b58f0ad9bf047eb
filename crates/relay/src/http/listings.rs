//! `/announced` listings shared by the requests that would make the same one: one prefix
//! under one grant, kept while the origin's routes are unchanged (its generation) and for at
//! most a second. Agents polling a community's channel list share a grant, so one listing of
//! thousands of paths serves all of them instead of being rebuilt per request (it was a
//! sixth of the relay's CPU with 300 agents polling 4 000 channels).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a listing is reused, whatever the generation says (a broadcast that closed
/// before its route was removed leaves it at once after this).
const MAX_AGE: Duration = Duration::from_secs(1);
/// Listings kept; past this the table starts over.
const CAPACITY: usize = 256;

/// What makes two listings the same.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct ListingKey {
    /// The prefix the request named.
    pub requested: String,
    /// The grant it was admitted with (root and subscribe patterns); `None` with auth off.
    pub grant: Option<String>,
}

struct Listed {
    generation: u64,
    at: Instant,
    body: Arc<str>,
}

#[derive(Default)]
pub(crate) struct Listings {
    entries: Mutex<HashMap<ListingKey, Listed>>,
}

impl Listings {
    /// The listing for `key` at `generation`: a kept one when it is as new, else `list()`'s.
    pub fn get_or_list<E>(
        &self,
        key: ListingKey,
        generation: u64,
        list: impl FnOnce() -> Result<String, E>,
    ) -> Result<Arc<str>, E> {
        let now = Instant::now();
        {
            let entries = self.entries.lock().expect("listings lock");
            if let Some(listed) = entries.get(&key) {
                if listed.generation == generation && now.duration_since(listed.at) < MAX_AGE {
                    return Ok(listed.body.clone());
                }
            }
        }
        let body: Arc<str> = list()?.into();
        let mut entries = self.entries.lock().expect("listings lock");
        if entries.len() >= CAPACITY && !entries.contains_key(&key) {
            entries.clear();
        }
        entries.insert(
            key,
            Listed {
                generation,
                at: now,
                body: body.clone(),
            },
        );
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn key(grant: &str) -> ListingKey {
        ListingKey {
            requested: "c/1".into(),
            grant: Some(grant.into()),
        }
    }

    #[test]
    fn a_listing_is_reused_until_the_generation_changes_and_per_grant() {
        let listings = Listings::default();
        let made = Cell::new(0);
        let list = |body: &str| {
            made.set(made.get() + 1);
            Ok::<_, ()>(body.to_string())
        };
        assert_eq!(
            &*listings.get_or_list(key("a"), 1, || list("x")).unwrap(),
            "x"
        );
        assert_eq!(
            &*listings.get_or_list(key("a"), 1, || list("y")).unwrap(),
            "x"
        );
        assert_eq!(made.get(), 1);
        // Another grant lists for itself; a new generation lists again.
        assert_eq!(
            &*listings.get_or_list(key("b"), 1, || list("z")).unwrap(),
            "z"
        );
        assert_eq!(
            &*listings.get_or_list(key("a"), 2, || list("w")).unwrap(),
            "w"
        );
        assert_eq!(made.get(), 3);
    }
}
