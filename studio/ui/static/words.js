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
  return inWords(m.message);
}

// A validation line from the studio (a data-channel refusal, an API error) in a visitor's words: a schedule's
// field named as its block (`segments[2].transition.frames` → `block 3, transition frames`), and pydantic's
// bounds said against the limit, with the field's unit (`Input should be less than or equal to 10000 (got
// 20000)` → `20000 frames is more than 10000 frames, the most it takes`). The limits are the server's own, the
// ones the page's fields show (fields.js). Any other line is shown as it is.
const BOUND = /^(.*?)(\w+)?: Input should be (greater|less) than( or equal to)? (-?[\d.e+]+)(?: \(got (.+)\))?$/;
const WHOLE = /^(.*?): Input should be a valid integer(?:, (.*?))?(?: \(got (.+)\))?$/;
export function inWords(line) {
  line = line.replace(/segments\[(\d+)\]\.?([\w.]*)/g,
                      (_, i, field) => `block ${+i + 1}${field ? `, ${field.replaceAll(".", " ")}` : ""}`);
  const bound = BOUND.exec(line);
  if (bound) {
    const [, head, field = "", side, orEqual, limit, got] = bound;
    const unit = /frames?$|transition$/.test(field) ? " frames" : "";
    const most = side === "less", limited = `${limit}${unit}`;
    const said = got === undefined ? `${orEqual ? `at ${most ? "most" : "least"}` : most ? "under" : "over"} ${limited}`
      : orEqual ? `${got}${unit} is ${most ? "more" : "less"} than ${limited}, the ${most ? "most" : "least"} it takes`
      : `${got}${unit} must be ${most ? "under" : "over"} ${limited}`;
    return `${head}${field}: ${said}`;
  }
  const whole = WHOLE.exec(line);
  if (whole) return `${whole[1]}: ${whole[3] === undefined ? "it" : whole[3]} is not a whole number`;
  return line;
}
