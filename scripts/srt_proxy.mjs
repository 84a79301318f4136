// srt's HTTP proxy (Anthropic sandbox-runtime, `@anthropic-ai/sandbox-runtime`)
// for `scripts/bench-egress`: the same `createHttpProxyServer` that srt's
// SandboxManager starts for a sandbox (sandbox-manager.js), listening on a
// loopback port, with a filter that allows the bench's names and a lookup
// that resolves them to loopback (as the Paddock proxy's resolver does in
// the bench). No TLS termination, no parent proxy: srt's plain
// allow-by-domain tunnel. Prints the port on stdout, serves until killed.
// Usage: node srt_proxy.mjs <the package's directory>
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const pkg = process.argv[2];
if (!pkg) {
  console.error('usage: node srt_proxy.mjs <node_modules/@anthropic-ai/sandbox-runtime>');
  process.exit(2);
}
const { createHttpProxyServer } = await import(
  pathToFileURL(join(pkg, 'dist/sandbox/http-proxy.js')).href
);
const allowed = new Set(['web.bench', 'bulk.bench']);
const loopback = (hostname, options, callback) => {
  const cb = typeof options === 'function' ? options : callback;
  const all = typeof options === 'object' && options !== null && options.all;
  if (!allowed.has(hostname)) {
    const e = new Error(`not a bench name: ${hostname}`);
    e.code = 'ENOTFOUND';
    cb(e);
  } else if (all) {
    cb(null, [{ address: '127.0.0.1', family: 4 }]);
  } else {
    cb(null, '127.0.0.1', 4);
  }
};
const server = createHttpProxyServer({
  filter: async (_port, host) => allowed.has(host),
  lookupFor: () => loopback,
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
