// A fingerprint of what a canvas shows now: its picture scaled to 32x18, hashed (FNV-1a), and
// how many colour samples are lit. Used in pages (media.js bundles it; status.test.mjs sends
// its source to the status page) to tell that a player's picture changes and is not blank.
export function canvasPicture(canvas) {
  if (!canvas || canvas.width === 0) return null;
  const probe = document.createElement("canvas");
  probe.width = 32;
  probe.height = 18;
  const ctx = probe.getContext("2d");
  ctx.drawImage(canvas, 0, 0, 32, 18);
  const data = ctx.getImageData(0, 0, 32, 18).data;
  let hash = 2166136261;
  let lit = 0;
  for (let i = 0; i < data.length; i++) {
    hash = Math.imul(hash ^ data[i], 16777619);
    if (i % 4 !== 3 && data[i] > 32) lit++;
  }
  return { hash: hash >>> 0, lit };
}
