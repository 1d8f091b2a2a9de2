/** Every schema trackd compiles is valid draft-07 JSON Schema and compiles in strict mode (trackd does both lazily or never at run time). */
import t from 'tap';
import { Type } from '@sinclair/typebox';
import { ScanMessage } from '../../schemas/scanMessage.js';
import { Cs463Payload } from '../../schemas/cs463Payload.js';
import { AssetCreate } from '../../src/assets/schemas.js';
import { CreateLocationBody } from '../../src/locations/schemas.js';
import { allRoutes } from '../../src/routes.js';
import type { Services } from '../../src/services.js';
import { compileValidator, schemaProblems } from '../../src/wire/validation.js';

t.test('route bodies, scan messages, reader payloads and bulk rows are valid draft-07 schemas', async (t) => {
  const bodies = allRoutes({} as Services).flatMap((route) =>
    route.body ? [[`${route.method} ${route.path}`, route.body.schema] as const] : [],
  );
  t.ok(bodies.length >= 8, `${bodies.length} route bodies`);
  const schemas = [
    ...bodies,
    ['scan message', ScanMessage],
    ['CS463 payload', Cs463Payload],
    ['asset row', AssetCreate],
    ['location row', CreateLocationBody],
  ] as const;
  for (const [name, schema] of schemas) {
    t.equal(schemaProblems(schema), undefined, name);
    // Compiled at first use in trackd: here at once, so that strict mode's refusals surface in the suite.
    t.doesNotThrow(() => compileValidator(schema)({}), `${name} compiles in strict mode`);
  }
});

t.test('a schema the meta-schema refuses is reported', async (t) => {
  t.match(schemaProblems({ ...Type.String(), minLength: -1 }), /minLength/);
  t.match(schemaProblems({ type: 'strin' } as never), /type/);
});
