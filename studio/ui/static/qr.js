// A QR code of a short text (a watch link), drawn on a canvas: byte mode, error correction level M (15% of
// the code may be covered or blurred), versions 1–10 (up to 213 bytes). Written here after ISO/IEC 18004 so
// the page needs no library and no network; the layout follows Project Nayuki's reference encoder (MIT).
// tests/test_ui_share_browser.py reads the code back module by module.

const ECC_PER_BLOCK = [0, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26];   // level M, by version
const BLOCKS = [0, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5];
const FORMAT_M = 0;                                                  // level M's two format bits
const MASKS = [
  (x, y) => (x + y) % 2 === 0, (x, y) => y % 2 === 0, (x) => x % 3 === 0, (x, y) => (x + y) % 3 === 0,
  (x, y) => (Math.floor(x / 3) + Math.floor(y / 2)) % 2 === 0, (x, y) => (x * y) % 2 + (x * y) % 3 === 0,
  (x, y) => ((x * y) % 2 + (x * y) % 3) % 2 === 0, (x, y) => ((x + y) % 2 + (x * y) % 3) % 2 === 0,
];

function rawModules(v) {          // modules left for data and error correction once the patterns are drawn
  let n = (16 * v + 128) * v + 64;
  if (v >= 2) { const a = Math.floor(v / 7) + 2; n -= (25 * a - 10) * a - 55; if (v >= 7) n -= 36; }
  return n;
}
const dataCodewords = (v) => Math.floor(rawModules(v) / 8) - ECC_PER_BLOCK[v] * BLOCKS[v];

// Reed–Solomon over GF(256) with the polynomial 0x11D
function gfMul(x, y) {
  let z = 0;
  for (let i = 7; i >= 0; i--) { z = (z << 1) ^ ((z >>> 7) * 0x11d); z ^= ((y >>> i) & 1) * x; }
  return z;
}
function rsDivisor(degree) {
  const r = new Array(degree - 1).fill(0).concat([1]);
  let root = 1;
  for (let i = 0; i < degree; i++) {
    for (let j = 0; j < r.length; j++) { r[j] = gfMul(r[j], root); if (j + 1 < r.length) r[j] ^= r[j + 1]; }
    root = gfMul(root, 2);
  }
  return r;
}
function rsRemainder(data, divisor) {
  const r = divisor.map(() => 0);
  for (const b of data) {
    const factor = b ^ r.shift(); r.push(0);
    divisor.forEach((c, i) => { r[i] ^= gfMul(c, factor); });
  }
  return r;
}

function codewords(bytes, v) {
  const bits = [], put = (value, n) => { for (let i = n - 1; i >= 0; i--) bits.push((value >>> i) & 1); };
  put(4, 4); put(bytes.length, v < 10 ? 8 : 16); bytes.forEach((b) => put(b, 8));
  const capacity = dataCodewords(v) * 8;
  put(0, Math.min(4, capacity - bits.length)); put(0, (8 - bits.length % 8) % 8);
  const data = [];
  for (let i = 0; i < bits.length; i += 8) data.push(bits.slice(i, i + 8).reduce((a, b) => (a << 1) | b, 0));
  for (let pad = 0xec; data.length < dataCodewords(v); pad ^= 0xec ^ 0x11) data.push(pad);
  // split into blocks, each with its error correction, then interleave
  const nBlocks = BLOCKS[v], eccLen = ECC_PER_BLOCK[v], raw = Math.floor(rawModules(v) / 8);
  const nShort = nBlocks - raw % nBlocks, shortLen = Math.floor(raw / nBlocks), divisor = rsDivisor(eccLen);
  const blocks = [];
  for (let i = 0, k = 0; i < nBlocks; i++) {
    const d = data.slice(k, k + shortLen - eccLen + (i < nShort ? 0 : 1)); k += d.length;
    const ecc = rsRemainder(d, divisor);
    if (i < nShort) d.push(0);
    blocks.push(d.concat(ecc));
  }
  const out = [];
  for (let i = 0; i < blocks[0].length; i++)
    blocks.forEach((b, j) => { if (i !== shortLen - eccLen || j >= nShort) out.push(b[i]); });
  return out;
}

function alignmentPositions(v, size) {
  if (v === 1) return [];
  const n = Math.floor(v / 7) + 2, step = Math.ceil((v * 4 + 4) / (n * 2 - 2)) * 2, out = [6];
  for (let pos = size - 7; out.length < n; pos -= step) out.splice(1, 0, pos);
  return out;
}

class Grid {
  constructor(v) {
    this.v = v; this.size = v * 4 + 17;
    this.dark = Array.from({ length: this.size }, () => new Array(this.size).fill(false));
    this.fixed = Array.from({ length: this.size }, () => new Array(this.size).fill(false));
  }
  set(x, y, dark) { this.dark[y][x] = dark; this.fixed[y][x] = true; }
  patterns() {
    const s = this.size;
    for (let i = 0; i < s; i++) { this.set(6, i, i % 2 === 0); this.set(i, 6, i % 2 === 0); }
    for (const [cx, cy] of [[3, 3], [s - 4, 3], [3, s - 4]])
      for (let dy = -4; dy <= 4; dy++) for (let dx = -4; dx <= 4; dx++) {
        const d = Math.max(Math.abs(dx), Math.abs(dy)), x = cx + dx, y = cy + dy;
        if (x >= 0 && x < s && y >= 0 && y < s) this.set(x, y, d !== 2 && d !== 4);
      }
    const at = alignmentPositions(this.v, s), last = at.length - 1;
    at.forEach((ax, i) => at.forEach((ay, j) => {
      if ((i === 0 && j === 0) || (i === 0 && j === last) || (i === last && j === 0)) return;
      for (let dy = -2; dy <= 2; dy++) for (let dx = -2; dx <= 2; dx++)
        this.set(ax + dx, ay + dy, Math.max(Math.abs(dx), Math.abs(dy)) !== 1);
    }));
    this.format(0);
    if (this.v >= 7) {
      let rem = this.v;
      for (let i = 0; i < 12; i++) rem = (rem << 1) ^ ((rem >>> 11) * 0x1f25);
      const bits = (this.v << 12) | rem;
      for (let i = 0; i < 18; i++) {
        const dark = ((bits >>> i) & 1) === 1, a = s - 11 + (i % 3), b = Math.floor(i / 3);
        this.set(a, b, dark); this.set(b, a, dark);
      }
    }
  }
  format(mask) {
    const s = this.size, data = (FORMAT_M << 3) | mask;
    let rem = data;
    for (let i = 0; i < 10; i++) rem = (rem << 1) ^ ((rem >>> 9) * 0x537);
    const bits = ((data << 10) | rem) ^ 0x5412, bit = (i) => ((bits >>> i) & 1) === 1;
    for (let i = 0; i <= 5; i++) this.set(8, i, bit(i));
    this.set(8, 7, bit(6)); this.set(8, 8, bit(7)); this.set(7, 8, bit(8));
    for (let i = 9; i < 15; i++) this.set(14 - i, 8, bit(i));
    for (let i = 0; i < 8; i++) this.set(s - 1 - i, 8, bit(i));
    for (let i = 8; i < 15; i++) this.set(8, s - 15 + i, bit(i));
    this.set(8, s - 8, true);
  }
  place(words) {
    const s = this.size; let i = 0;
    for (let right = s - 1; right >= 1; right -= 2) {
      if (right === 6) right = 5;
      for (let vert = 0; vert < s; vert++) for (let j = 0; j < 2; j++) {
        const x = right - j, up = ((right + 1) & 2) === 0, y = up ? s - 1 - vert : vert;
        if (!this.fixed[y][x] && i < words.length * 8) { this.dark[y][x] = ((words[i >>> 3] >>> (7 - (i & 7))) & 1) === 1; i++; }
      }
    }
  }
  masked(mask) {
    const out = this.dark.map((row, y) => row.map((d, x) => (!this.fixed[y][x] && MASKS[mask](x, y)) ? !d : d));
    return out;
  }
}

// The usual penalty (runs, 2×2 blocks, finder-like patterns, dark/light balance): the mask with the lowest is
// the one scanners read most easily.
function penalty(m) {
  const s = m.length; let p = 0, dark = 0;
  const lines = [...m, ...m[0].map((_, x) => m.map((row) => row[x]))];
  for (const line of lines) {
    let run = 1;
    for (let i = 1; i <= s; i++) {
      if (i < s && line[i] === line[i - 1]) { run++; continue; }
      if (run >= 5) p += run - 2;
      run = 1;
    }
    const str = line.map((d) => (d ? "1" : "0")).join("");
    for (const pat of ["10111010000", "00001011101"]) for (let k = str.indexOf(pat); k >= 0; k = str.indexOf(pat, k + 1)) p += 40;
  }
  for (let y = 0; y + 1 < s; y++) for (let x = 0; x + 1 < s; x++) {
    const c = m[y][x];
    if (c === m[y][x + 1] && c === m[y + 1][x] && c === m[y + 1][x + 1]) p += 3;
  }
  m.forEach((row) => row.forEach((d) => { if (d) dark++; }));
  return p + Math.floor(Math.abs(dark * 20 - s * s * 10) / (s * s)) * 10;
}

// The modules (rows of booleans, true = dark) of `text`'s QR code, with the best mask or `mask` (0–7); null when
// the text is over 213 bytes.
export function qrModules(text, mask = null) {
  const bytes = [...new TextEncoder().encode(text)];
  let v = 1;
  while (v < BLOCKS.length && dataCodewords(v) * 8 < 4 + (v < 10 ? 8 : 16) + bytes.length * 8) v++;
  if (v >= BLOCKS.length) return null;
  const grid = new Grid(v);
  grid.patterns(); grid.place(codewords(bytes, v));
  let best = null;
  for (const k of mask === null ? [0, 1, 2, 3, 4, 5, 6, 7] : [mask]) {
    grid.format(k);
    const m = grid.masked(k), score = penalty(m);
    if (!best || score < best.score) best = { m, score };
  }
  return best.m;
}

// `text` as a QR code on `canvas` (4 px a module, a 4-module quiet zone); an empty canvas for no text.
export function drawQr(canvas, text, scale = 4) {
  const m = text ? qrModules(text) : null;
  const side = m ? (m.length + 8) * scale : 0;
  canvas.width = side; canvas.height = side;
  if (!m) return;
  const g = canvas.getContext("2d");
  g.fillStyle = "#fff"; g.fillRect(0, 0, side, side); g.fillStyle = "#000";
  m.forEach((row, y) => row.forEach((d, x) => { if (d) g.fillRect((x + 4) * scale, (y + 4) * scale, scale, scale); }));
}
