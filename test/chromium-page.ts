/**
 * Loads a local HTML page in headless Chromium (the system's `chromium`, Debian's package) and
 * reports what went wrong there: console errors, uncaught exceptions, failed loads (the DevTools
 * protocol over a pipe: `--remote-debugging-pipe`, no npm dependency, no port).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';

/** The Chromium binary: `$CHROMIUM`, else `chromium` or `chromium-browser` on PATH; null when none runs. */
export function chromiumPath(): string | null {
  const candidates = process.env.CHROMIUM ? [process.env.CHROMIUM] : ['chromium', 'chromium-browser'];
  for (const bin of candidates) {
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 });
    if (r.status === 0 && /chrom/i.test(r.stdout)) return bin;
  }
  return null;
}

/** What loading a page showed. */
export interface PageReport {
  /** Console errors, uncaught exceptions and error log entries (failed loads), as text. */
  readonly errors: string[];
  /** The value of `expression` evaluated in the loaded page. */
  readonly value: unknown;
}

type Message = { id?: number; method?: string; sessionId?: string; params?: Record<string, unknown>; result?: Record<string, unknown>; error?: { message: string } };

/** A DevTools-protocol connection over Chromium's pipe (NUL-terminated JSON messages). */
class Cdp {
  private next = 1;
  private buffer = '';
  private readonly pending = new Map<number, { resolve: (r: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  readonly events: Message[] = [];
  private waiters: { match: (m: Message) => boolean; resolve: () => void }[] = [];

  constructor(
    private readonly toBrowser: Writable,
    fromBrowser: Readable,
  ) {
    fromBrowser.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString('utf8');
      for (let at = this.buffer.indexOf('\0'); at >= 0; at = this.buffer.indexOf('\0')) {
        const message = JSON.parse(this.buffer.slice(0, at)) as Message;
        this.buffer = this.buffer.slice(at + 1);
        this.dispatch(message);
      }
    });
  }

  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Record<string, unknown>> {
    const id = this.next++;
    this.toBrowser.write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  /** Resolves at the first event (already received or to come) that `match` accepts. */
  waitFor(match: (m: Message) => boolean): Promise<void> {
    if (this.events.some(match)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }

  private dispatch(m: Message): void {
    if (m.id !== undefined) {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.error) p?.reject(new Error(m.error.message));
      else p?.resolve(m.result ?? {});
      return;
    }
    this.events.push(m);
    this.waiters = this.waiters.filter((w) => (w.match(m) ? (w.resolve(), false) : true));
  }
}

/** The text of a console call's arguments. */
function consoleText(params: Record<string, unknown>): string {
  const args = Array.isArray(params.args) ? (params.args as { value?: unknown; description?: string }[]) : [];
  return args.map((a) => (a.value !== undefined ? String(a.value) : (a.description ?? ''))).join(' ');
}

/** The errors among the events of one page session. */
function pageErrors(events: readonly Message[], sessionId: string): string[] {
  const errors: string[] = [];
  for (const e of events) {
    if (e.sessionId !== sessionId || !e.params) continue;
    const p = e.params;
    if (e.method === 'Runtime.consoleAPICalled' && (p.type === 'error' || p.type === 'assert')) errors.push(`console.${String(p.type)}: ${consoleText(p)}`);
    if (e.method === 'Runtime.exceptionThrown') {
      const d = p.exceptionDetails as { text?: string; exception?: { description?: string } } | undefined;
      errors.push(`uncaught: ${d?.exception?.description ?? d?.text ?? 'exception'}`);
    }
    if (e.method === 'Log.entryAdded') {
      const entry = p.entry as { level?: string; text?: string; url?: string } | undefined;
      if (entry?.level === 'error') errors.push(`log: ${entry.text ?? ''}${entry.url ? ` (${entry.url})` : ''}`);
    }
  }
  return errors;
}

/**
 * Opens `file` in headless Chromium, waits for its load event (and `settleMs` more for late
 * messages), evaluates `expression` there and returns it with every error the page logged.
 */
export async function loadPage(bin: string, file: string, expression = 'null', settleMs = 300, timeoutMs = 60_000): Promise<PageReport> {
  const profile = mkdtempSync(join(tmpdir(), 'comlrl-chromium-'));
  // fd 3: commands to the browser; fd 4: its replies and events.
  const child = spawn(bin, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--remote-debugging-pipe', `--user-data-dir=${profile}`, 'about:blank'], {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString('utf8')).slice(-4000);
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exited = new Promise<never>((_, reject) => child.on('exit', (code, signal) => reject(new Error(`chromium exited (${code ?? signal}) before the page was checked; its stderr ends:\n${stderr}`))));
  try {
    const cdp = new Cdp(child.stdio[3] as Writable, child.stdio[4] as Readable);
    const run = async (): Promise<PageReport> => {
      const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
      const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
      const session = String(sessionId);
      for (const domain of ['Runtime', 'Log', 'Page']) await cdp.send(`${domain}.enable`, {}, session);
      const loaded = cdp.waitFor((m) => m.sessionId === session && m.method === 'Page.loadEventFired');
      await cdp.send('Page.navigate', { url: pathToFileURL(file).href }, session);
      await loaded;
      await new Promise((r) => setTimeout(r, settleMs));
      const evaluated = await cdp.send('Runtime.evaluate', { expression, returnByValue: true }, session);
      const value = (evaluated.result as { value?: unknown } | undefined)?.value;
      const report = { errors: pageErrors(cdp.events, session), value };
      await cdp.send('Browser.close').catch(() => ({}));
      return report;
    };
    return await Promise.race([run(), exited]);
  } finally {
    clearTimeout(timer);
    // Let it finish writing its profile before the folder goes.
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const grace = setTimeout(() => child.kill('SIGKILL'), 5000);
      await gone;
      clearTimeout(grace);
    }
    rmSync(profile, { recursive: true, force: true, maxRetries: 3 });
  }
}
