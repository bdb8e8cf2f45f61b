// Starts aff-serve (path in $AFF_SERVE) on a free loopback port for one test file
// and stops it afterwards; shared by the client and load tests, with their common assertions.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';

export async function startServer(args) {
  const bin = process.env.AFF_SERVE;
  if (!bin) throw new Error('AFF_SERVE must name the aff-serve binary');
  const proc = spawn(bin, ['--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('aff-serve did not start:\n' + log)), 10000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(log);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => reject(new Error(`aff-serve exited with ${code}:\n${log}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  // Ready when /health says so (a model takes a moment to load).
  for (const t0 = Date.now(); ;) {
    const r = await fetch(`${base}/health`).catch(() => null);
    if (r && r.status === 200) break;
    if (proc.exitCode !== null || Date.now() - t0 > 60000) throw new Error('aff-serve never became ready:\n' + log);
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    port,
    base,
    log: () => log,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      proc.kill('SIGTERM');
      await once(proc, 'exit');
    },
    // For shutdown tests: send a signal; exited() resolves to the exit status (a
    // death by signal rejects).
    signal(name) { proc.kill(name); },
    exited() {
      if (proc.exitCode !== null) return Promise.resolve(proc.exitCode);
      return once(proc, 'exit').then(([code, sig]) => {
        if (sig) throw new Error(`aff-serve died by ${sig}:\n${log}`);
        return code;
      });
    },
    // One metric's value from /metrics.
    async metric(name, headers = {}) {
      const text = await (await fetch(`${base}/metrics`, { headers })).text();
      const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
      if (!m) throw new Error(`no metric ${name} in:\n${text}`);
      return Number(m[1]);
    },
  };
}

// Awaits a client call that must fail with HTTP `status`; `check` looks further at the error
// (the OpenAI client's APIError: code, message).
export async function expectError(promise, status, check) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.status, status, e.message);
    check?.(e);
    return true;
  });
}
