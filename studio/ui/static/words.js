// What the page says, in a visitor's words: counts with their plurals right, and the session's refusals said as
// what the visitor did and what to do instead. The technical line (field paths, message types) stays in the
// data channel's and the API's JSON; only what the page shows is rephrased.

export const plural = (n, word, many = `${word}s`) => `${n} ${n === 1 ? word : many}`;

const NOT_DRIVABLE = "this source is a recording: driving works on the built-in engine and connected engines";
const REFUSALS = {         // request → what the page says instead of "'seek' needs a recorded source; …"
  seek: "a live engine has no past to go back to: clicking the ruler seeks on recorded sources only",
  key: NOT_DRIVABLE, input: NOT_DRIVABLE, autopilot: NOT_DRIVABLE,
};

// A data-channel `error` (docs/datachannel.md) → the line the page shows.
export function refusal(m) {
  if (REFUSALS[m.request] && m.message.includes("needs a")) return REFUSALS[m.request];
  // "segments[2].transition.frames: 700 is longer…" → "block 3, transition frames: 700 is longer…"
  const field = /^segments\[(\d+)\]\.?([\w.]*):\s*(.*)$/.exec(m.message);
  if (field) return `block ${+field[1] + 1}${field[2] ? `, ${field[2].replaceAll(".", " ")}` : ""}: ${field[3]}`;
  return m.message;
}
