// Every module that defines shard commands: the shard worker loads this so that each command name it
// may receive is registered in its own thread.
import '../assets/store.js';
import '../bulk/assetRows.js';
import '../bulk/locationRows.js';
import '../locations/commands.js';
import '../masterdata/tags.js';
import '../scans/apply.js';
import '../events/commands.js';
import '../webhooks/commands.js';
import './ownership.js';
import '../events/tickets.js';
