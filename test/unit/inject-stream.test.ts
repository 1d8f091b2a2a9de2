/**
 * A streamed answer of an injected request (src/http/inject.ts, `streamAnswer`), as a forwarded
 * export's owner runs it: the response resolves at the first piece, the reader gets every piece in
 * order, the handler's writes push back while the reader lags (so the owner never holds the whole
 * body), and a reader that leaves early aborts the exchange (the export's statement is closed).
 */
import type uWS from 'uWebSockets.js';
import t from 'tap';
import { inject } from '../../src/http/inject.js';

const PIECE = 64 * 1024;

/** A handler that streams `pieces` pieces the way server.ts sendStream does: write until false, then wait for onWritable. */
function streamingHandler(pieces: number, seen: { refused: number; written: number; aborted: boolean }) {
  return (res: uWS.HttpResponse) => {
    res.onAborted(() => {
      seen.aborted = true;
    });
    const pump = () => {
      while (seen.written < pieces && !seen.aborted) {
        const piece = String(seen.written % 10).repeat(PIECE);
        seen.written++;
        if (!res.write(piece)) {
          seen.refused++;
          return;
        }
      }
      if (seen.written === pieces && !seen.aborted) res.end(undefined);
    };
    res.onWritable(() => {
      pump();
      return true;
    });
    res.writeStatus('200 OK');
    res.writeHeader('Content-Type', 'application/x-ndjson');
    pump();
  };
}

t.test('a streamed answer resolves at its first piece and comes through whole, in order, with backpressure', async (t) => {
  const seen = { refused: 0, written: 0, aborted: false };
  const response = await inject(streamingHandler(48, seen) as never, { method: 'GET', url: '/x', streamAnswer: true });
  t.ok(response.stream !== undefined, 'the response carries the pieces as a stream');
  t.ok(seen.written < 48, `it resolved before the handler wrote everything (${seen.written} of 48 pieces written)`);
  t.equal(response.headers['content-type'], 'application/x-ndjson');
  let bytes = 0;
  let inOrder = true;
  for await (const piece of response.stream!) {
    for (let at = 0; at < piece.byteLength; at += PIECE) {
      // Pieces may be split or joined on the way; each 64 KiB run carries its index's digit.
      if (piece[at] !== 48 + (Math.floor((bytes + at) / PIECE) % 10)) inOrder = false;
    }
    bytes += piece.byteLength;
  }
  t.equal(bytes, 48 * PIECE, 'every byte arrived');
  t.ok(inOrder, 'in order');
  t.ok(seen.refused > 0, `the handler's writes pushed back while the reader lagged (${seen.refused} times)`);
  t.notOk(seen.aborted, 'and it was not aborted');
});

t.test('a reader that leaves before the end aborts the exchange', async (t) => {
  const seen = { refused: 0, written: 0, aborted: false };
  const response = await inject(streamingHandler(1000, seen) as never, { method: 'GET', url: '/x', streamAnswer: true });
  for await (const _ of response.stream!) break;
  t.ok(seen.aborted, 'the handler saw its exchange aborted');
  t.ok(seen.written < 1000, `and stopped writing (${seen.written} of 1000 pieces)`);
});

t.test('without streamAnswer the pieces are kept until the end, as before', async (t) => {
  const seen = { refused: 0, written: 0, aborted: false };
  const response = await inject(streamingHandler(20, seen) as never, { method: 'GET', url: '/x' });
  t.equal(response.stream, undefined);
  t.equal(Buffer.byteLength(response.body), 20 * PIECE, 'the whole body in one string');
  t.equal(seen.refused, 0, 'no write pushed back');
});
