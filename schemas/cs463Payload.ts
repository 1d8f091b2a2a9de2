import { Type } from '@sinclair/typebox';

const Cs463TagRead = Type.Object({
  epc: Type.String({ minLength: 1, maxLength: 255 }),
  /** Epoch microseconds, UTC. */
  timeStampOfRead: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
  antennaPort: Type.Integer({ minimum: 0 }),
  capturePointName: Type.String({ minLength: 1, maxLength: 255 }),
});

/** A CSL CS463 reader's MQTT payload. Other keys (sequenceNumber, numberOfTags, timeZone, rssi, ...) are ignored. */
export const Cs463Payload = Type.Object({
  rfidReaderName: Type.String({ minLength: 1, maxLength: 255 }),
  tags: Type.Array(Cs463TagRead, { maxItems: 10_000 }),
});
