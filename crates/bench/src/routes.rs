//! Waiting for announcements to land: setup awaits the route events themselves (origin
//! interests), never a sleep.

use std::collections::HashSet;

use starling_model::Origin;
use starling_proto::Path;

use crate::{within, Error};

/// Wait until every path in `paths` has a best route in `origin` that `accept` approves (given
/// the route's hop chain, publisher first). Each change is checked once, so waiting for P paths
/// costs O(P + changes), not O(P × changes).
pub(crate) async fn wait_routes(
    origin: &Origin,
    paths: &[Path],
    accept: impl Fn(&Path, &[u64]) -> bool,
) -> Result<(), Error> {
    // Registered before the first look, so no change can slip between the two.
    let interest = origin.interest(Path::empty())?;
    let ready = |path: &Path| {
        origin
            .route(path, None)
            .is_some_and(|announced| accept(path, &announced.route.hops))
    };
    let mut missing: HashSet<Path> = paths.iter().filter(|p| !ready(p)).cloned().collect();
    let mut changed = Vec::new();
    while !missing.is_empty() {
        within("announcements", interest.changed(&mut changed)).await?;
        for path in changed.drain(..) {
            if missing.contains(&path) && ready(&path) {
                missing.remove(&path);
            }
        }
    }
    Ok(())
}
