// The media comparator's own checks: each defect a relay could introduce is caught.
import assert from "node:assert/strict";
import { test } from "node:test";
import { compareChunks, percentile } from "./media-check.mjs";

// Three groups of four chunks: a keyframe then three deltas.
const sent = Array.from({ length: 12 }, (_, i) => ({ ts: i * 50000, key: i % 4 === 0, size: 100 + i, hash: 1000 + i }));
const copy = (list) => list.map((c) => ({ ...c }));

test("an exact copy from a keyframe to a cut tail matches", () => {
  const got = compareChunks(sent, copy(sent.slice(4, 10)));
  assert.deepEqual(got, { matched: 6, skipped: 0, first: 200000, last: 450000 });
});

test("a dropped delta is caught", () => {
  const received = copy(sent.filter((_, i) => i !== 6));
  assert.throws(() => compareChunks(sent, received), /never arrived/);
});

test("a dropped keyframe is caught", () => {
  const received = copy(sent.filter((_, i) => i !== 4));
  assert.throws(() => compareChunks(sent, received), /never arrived/);
});

test("corruption is caught", () => {
  const received = copy(sent);
  received[5].hash ^= 1;
  assert.throws(() => compareChunks(sent, received), /differs/);
});

test("a reorder is caught", () => {
  const received = copy(sent);
  [received[5], received[6]] = [received[6], received[5]];
  assert.throws(() => compareChunks(sent, received), /reordered|never arrived/);
});

test("a start past a keyframe is caught", () => {
  assert.throws(() => compareChunks(sent, copy(sent.slice(1))), /not a keyframe/);
});

test("a whole skipped group is allowed for video and counted, never for audio", () => {
  const received = copy([...sent.slice(0, 4), ...sent.slice(8)]);
  assert.equal(compareChunks(sent, received).skipped, 1);
  assert.throws(() => compareChunks(sent, received, { groups: false }), /never arrived/);
});

test("percentile is nearest rank", () => {
  const values = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(percentile(values, 50), 50);
  assert.equal(percentile(values, 99), 99);
  assert.equal(percentile([7], 99), 7);
});
