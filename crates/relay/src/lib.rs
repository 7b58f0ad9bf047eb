//! starling-relay (work in progress).
