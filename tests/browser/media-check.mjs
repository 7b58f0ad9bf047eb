// Compares what a player decoded with what the publisher encoded, chunk for chunk.
//
// `sent` and `received` are lists of { ts (us), key, size, hash } in the order the
// publishing page's encoder produced them and the watching page's decoder was given them.
// A player may start at any keyframe and stop at any point, and under load it may skip ahead
// to a later group (a whole group, from its keyframe): those are allowed and counted. What
// fails is what a relay must never do: a chunk whose bytes differ from the one sent with its
// timestamp (corruption), a chunk missing inside a group or a group that does not begin with
// its keyframe (a drop), or chunks out of the order sent (a reorder). `groups: false` (audio,
// where every chunk is a keyframe) allows no skip at all.

/** Returns { matched, skipped, first, last } or throws an Error naming the first defect. */
export function compareChunks(sent, received, { groups = true, what = "chunks" } = {}) {
  if (received.length === 0) throw new Error(`${what}: nothing was received`);
  const index = new Map(sent.map((chunk, i) => [chunk.ts, i]));
  const at = (chunk) => {
    const i = index.get(chunk.ts);
    if (i === undefined) throw new Error(`${what}: received a chunk at ${chunk.ts} us that was never sent`);
    const original = sent[i];
    if (original.size !== chunk.size || original.hash !== chunk.hash || original.key !== chunk.key) {
      throw new Error(
        `${what}: the chunk at ${chunk.ts} us differs from the one sent ` +
          `(size ${chunk.size} vs ${original.size}, hash ${chunk.hash} vs ${original.hash})`,
      );
    }
    return i;
  };
  let previous = at(received[0]);
  if (groups && !received[0].key) throw new Error(`${what}: the first chunk received is not a keyframe`);
  let skipped = 0;
  for (let n = 1; n < received.length; n++) {
    const i = at(received[n]);
    if (i === previous + 1) {
      previous = i;
      continue;
    }
    if (i <= previous) {
      throw new Error(`${what}: chunk ${n} (${received[n].ts} us) arrived after a later one (reordered or repeated)`);
    }
    if (!groups || !received[n].key) {
      throw new Error(
        `${what}: ${i - previous - 1} chunk(s) sent between ${sent[previous].ts} and ${received[n].ts} us never arrived`,
      );
    }
    skipped += sent.slice(previous + 1, i).filter((c) => c.key).length || 1;
    previous = i;
  }
  return { matched: received.length, skipped, first: received[0].ts, last: received.at(-1).ts };
}

/** The p-th percentile (0..100) of `values`, nearest rank. */
export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}
