#!/usr/bin/env node
// tw-peer-node-ws: the program a typical Node.js user writes to follow Binance bookTicker streams,
// measured beside tickwire by `tickwire bench e2e`.
//
// ws + JSON.parse, with nothing tuned: one WebSocket connection to a combined-stream URL, each
// message parsed, the best bid and ask parsed as numbers, their mid computed, and one record kept
// per bookTicker: the update id `u` and the wall-clock time the mid was computed. Records stay in
// preallocated typed arrays and are written at exit, so file I/O stays out of the measurement.
// The record format is described in benches/peers/README.md.
//
// --core: Node.js has no sched_setaffinity, so the flag is accepted (the harness passes the same
// flags to every peer) but not applied here; the harness pins this peer from outside with
// `taskset -c N node index.js ...`, which covers every thread V8 and libuv start.
'use strict';

const fs = require('node:fs');
const { performance } = require('node:perf_hooks');
const WebSocket = require('ws');

const USAGE =
  'usage: node index.js --url WSS_URL --ca CA_PEM --out FILE ' +
  '[--count N] [--duration-secs S] [--core N]';

// Records reserved up front when --count is not given; the arrays double if a run goes past it.
const DEFAULT_RECORD_CAPACITY = 1 << 20;

function parseArgs(words) {
  const args = { url: null, ca: null, out: null, count: null, durationSecs: null, core: null };
  for (let i = 0; i < words.length; i++) {
    let flag = words[i];
    let value;
    const equals = flag.indexOf('=');
    if (equals >= 0) {
      value = flag.slice(equals + 1);
      flag = flag.slice(0, equals);
    } else {
      value = words[++i];
    }
    if (value === undefined) throw new Error(`${flag} needs a value`);
    const number = (min) => {
      const parsed = Number(value);
      if (value.trim() === '' || !Number.isFinite(parsed) || parsed < min) {
        throw new Error(`${flag}: ${JSON.stringify(value)} is not a valid number`);
      }
      return parsed;
    };
    switch (flag) {
      case '--url': args.url = value; break;
      case '--ca': args.ca = value; break;
      case '--out': args.out = value; break;
      case '--count': args.count = number(0); break;
      case '--duration-secs': args.durationSecs = number(0); break;
      case '--core': args.core = number(0); break;
      default: throw new Error(`unknown argument ${flag}`);
    }
  }
  for (const required of ['url', 'ca', 'out']) {
    if (args[required] === null) throw new Error(`--${required} is required`);
  }
  return args;
}

let args;
try {
  args = parseArgs(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`tw-peer-node-ws: ${error.message}\n${USAGE}\n`);
  process.exit(2);
}

// Hot-path records: `u` as a double (exact below 2^53; Binance update ids are about 2^43) and the
// performance.now() reading in ms as a double. Both become u64 ns only at exit, so the hot path
// allocates no BigInt.
let capacity = args.count !== null ? args.count : DEFAULT_RECORD_CAPACITY;
let updateIds = new Float64Array(capacity);
let doneMs = new Float64Array(capacity);
let received = 0;
let skipped = 0;
// The mids are summed into a module-scope variable that closures share, which V8 keeps, so the
// parsing and arithmetic that feed it cannot be dropped as dead code.
let midChecksum = 0;
let finished = false;
let durationTimer = null;

function grow() {
  capacity *= 2;
  const biggerIds = new Float64Array(capacity);
  biggerIds.set(updateIds);
  updateIds = biggerIds;
  const biggerDone = new Float64Array(capacity);
  biggerDone.set(doneMs);
  doneMs = biggerDone;
}

// Wall-clock ns since the Unix epoch is performance.timeOrigin + performance.now(), both in ms as
// doubles. Their sum, about 1.8e12 ms, has a double's ulp of 2^-12 ms (244 ns), so it is not
// summed in floating point: timeOrigin is turned into integer ns once and each now() reading
// (small, so sub-ns resolution from a monotonic clock) is added as integer ns. What remains is the
// precision of timeOrigin itself (a double in ms, so also ~244 ns, a constant offset for the whole
// run) and the drift between the monotonic clock behind now() and CLOCK_REALTIME, which only NTP
// slewing during the run could cause. So these stamps are good to well under 1 µs, against the
// Rust peers' directly read CLOCK_REALTIME.
function writeRecords() {
  const originNs = BigInt(Math.round(performance.timeOrigin * 1e6));
  const bytes = Buffer.allocUnsafe(received * 16);
  for (let i = 0; i < received; i++) {
    bytes.writeBigUInt64LE(BigInt(updateIds[i]), i * 16);
    bytes.writeBigUInt64LE(originNs + BigInt(Math.round(doneMs[i] * 1e6)), i * 16 + 8);
  }
  fs.writeFileSync(args.out, bytes);
}

function finish(error) {
  if (finished) return;
  finished = true;
  clearTimeout(durationTimer);
  let exitCode = 0;
  try {
    // The records are written whatever ended the run, so a failed run still shows how far it got.
    writeRecords();
  } catch (writeError) {
    process.stderr.write(`tw-peer-node-ws: writing ${args.out}: ${writeError.message}\n`);
    exitCode = 1;
  }
  if (error) {
    process.stderr.write(`tw-peer-node-ws: ${error.message}\n`);
    exitCode = 1;
  }
  if (skipped > 0) {
    process.stderr.write(`tw-peer-node-ws: skipped ${skipped} messages that were not bookTicker\n`);
  }
  process.stdout.write(`received=${received}\n`, () => process.exit(exitCode));
}

let ca;
try {
  ca = fs.readFileSync(args.ca);
} catch (error) {
  finish(new Error(`${args.ca}: ${error.message}`));
  return;
}

const socket = new WebSocket(args.url, { ca });
if (args.durationSecs !== null) {
  durationTimer = setTimeout(() => {
    socket.close();
    finish(null);
  }, args.durationSecs * 1000);
}

socket.on('message', (payload, isBinary) => {
  if (finished) return;
  if (isBinary) {
    skipped++;
    return;
  }
  let ticker;
  try {
    ticker = JSON.parse(payload).data;
  } catch {
    skipped++;
    return;
  }
  if (ticker === undefined || ticker === null || ticker.e !== 'bookTicker') {
    skipped++;
    return;
  }
  const mid = (parseFloat(ticker.b) + parseFloat(ticker.a)) / 2;
  if (received === capacity) grow();
  doneMs[received] = performance.now();
  updateIds[received] = ticker.u;
  received++;
  midChecksum += mid;
  if (args.count !== null && received >= args.count) {
    socket.terminate();
    finish(null);
  }
});

socket.on('close', () => finish(null));
socket.on('error', (error) => finish(new Error(`${args.url}: ${error.message}`)));

if (args.count === 0) {
  socket.terminate();
  finish(null);
}
