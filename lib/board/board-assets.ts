import { formatMs } from './board-view.js';

// The page's script and stylesheet, served by the board itself (no build step, no CDN: it works
// offline). The script writes text only through textContent and attributes through properties —
// never innerHTML — so a key is always shown as text.

export const BOARD_JS = `'use strict';
(() => {
  const formatMs = ${formatMs.toString()};
  const root = document.getElementById('board');
  const api = root.dataset.api;
  const readOnly = root.dataset.readOnly === 'true';
  const refreshMs = Math.max(1000, Number(root.dataset.refreshMs) || 1000);
  const filter = document.getElementById('filter');
  const status = document.getElementById('status');
  const updated = document.getElementById('updated');
  const COLUMNS = ['Key', 'Purpose', 'Token', 'Held for', 'Remaining', 'Waiters'];
  // The longest remaining time seen per key: the bar's full length (the server knows no ttl of another process's hold).
  const longest = new Map();
  let timer;
  let busy = false;

  const el = (tag, text, className) => {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (className) e.className = className;
    return e;
  };
  const say = (text, error, kind) => {
    status.textContent = text;
    status.className = error ? 'error' : '';
    status.dataset.kind = kind || 'release';
  };

  function lockRow(lock) {
    const tr = el('tr');
    tr.dataset.key = lock.key;
    const key = el('td', undefined, 'key');
    key.appendChild(el('code', lock.key));
    if (lock.local) key.append(' ', el('span', 'this process', 'tag'));
    if (lock.permits) key.append(' ', el('span', lock.holders + '/' + lock.permits + ' permits', 'tag'));
    tr.appendChild(key);
    tr.appendChild(el('td', lock.purpose));
    tr.appendChild(el('td', lock.token === null ? '—' : lock.token, 'num'));
    tr.appendChild(el('td', formatMs(lock.heldForMs), 'num'));
    const id = lock.backend + '\\u0000' + lock.key;
    const full = Math.max(lock.remainingMs, longest.get(id) || 0);
    longest.set(id, full);
    const remaining = el('td', undefined, 'remaining');
    const meter = el('meter');
    meter.min = 0;
    meter.max = full;
    meter.value = lock.remainingMs;
    remaining.append(meter, ' ', el('span', formatMs(lock.remainingMs)));
    tr.appendChild(remaining);
    tr.appendChild(el('td', String(lock.waiters), 'num'));
    if (!readOnly) {
      const td = el('td');
      const button = el('button', 'Force release');
      button.type = 'button';
      button.dataset.action = 'release';
      button.dataset.key = lock.key;
      button.dataset.backend = lock.backend;
      td.appendChild(button);
      tr.appendChild(td);
    }
    return tr;
  }

  function backendSection(backend) {
    const section = el('section');
    section.dataset.backend = backend.name;
    const h2 = el('h2', backend.name + ' ');
    h2.appendChild(el('small', backend.purposes.join(', ') || 'no purpose routed here'));
    section.appendChild(h2);
    if (backend.error) section.appendChild(el('p', backend.error, 'error'));
    else if (backend.locks.length === 0) section.appendChild(el('p', 'No lock held.', 'empty'));
    const table = el('table');
    table.hidden = backend.locks.length === 0;
    const head = el('tr');
    for (const c of readOnly ? COLUMNS : [...COLUMNS, '']) {
      const th = el('th', c);
      th.scope = 'col';
      head.appendChild(th);
    }
    table.appendChild(el('thead')).appendChild(head);
    const body = table.appendChild(el('tbody'));
    for (const lock of backend.locks) body.appendChild(lockRow(lock));
    section.appendChild(table);
    return section;
  }

  function applyFilter() {
    const needle = filter.value.trim().toLowerCase();
    for (const tr of root.querySelectorAll('tbody tr')) tr.hidden = needle !== '' && !tr.dataset.key.toLowerCase().includes(needle);
  }

  function render(view) {
    // Bar lengths only for the keys still shown: a tab left open for days does not grow.
    const shown = new Set(view.backends.flatMap((b) => b.locks.map((l) => l.backend + '\\u0000' + l.key)));
    for (const id of longest.keys()) if (!shown.has(id)) longest.delete(id);
    for (const old of root.querySelectorAll('section')) old.remove();
    for (const backend of view.backends) root.appendChild(backendSection(backend));
    updated.textContent = 'Updated ' + new Date(view.at).toLocaleTimeString();
    applyFilter();
  }

  // The next refresh: a second after this one ended, or four times as long as it took — a
  // backend with thousands of keys is not asked again before it has answered the last time.
  let pause = refreshMs;
  async function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    const started = Date.now();
    try {
      const response = await fetch(api, { headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' });
      if (!response.ok) throw new Error('HTTP ' + response.status);
      render(await response.json());
      root.dataset.refreshed = String(Date.now());
      // A failed refresh is news only until one succeeds again (a release's result stays).
      if (status.dataset.kind === 'refresh') say('', false);
    } catch (error) {
      say('Could not refresh: ' + error.message, true, 'refresh');
    } finally {
      busy = false;
      pause = Math.max(refreshMs, 4 * (Date.now() - started));
    }
  }

  function start() {
    clearTimeout(timer);
    if (document.hidden) return;
    timer = setTimeout(async () => {
      await refresh();
      start();
    }, pause);
  }

  async function release(button) {
    const { key, backend } = button.dataset;
    if (!confirm('Force-release ' + JSON.stringify(key) + ' on ' + backend + '?\\n\\nIts holder is told (its signal aborts) and the key goes to the next waiter.')) return;
    button.disabled = true;
    try {
      const response = await fetch(api + '/force-release', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        credentials: 'same-origin',
        body: JSON.stringify({ key, backend }),
      });
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(answer.message || 'HTTP ' + response.status);
      say(answer.released ? 'Released ' + JSON.stringify(key) + ' on ' + backend + '.' : JSON.stringify(key) + ' on ' + backend + ' was not held any more.', false);
    } catch (error) {
      say('Could not release ' + JSON.stringify(key) + ': ' + error.message, true);
    } finally {
      button.disabled = false;
      await refresh();
    }
  }

  filter.addEventListener('input', applyFilter);
  root.addEventListener('click', (event) => {
    const button = event.target.closest('button[data-action="release"]');
    if (button) void release(button);
  });
  // Paused while the tab is hidden; one refresh at once when it shows again.
  document.addEventListener('visibilitychange', () => {
    start();
    if (!document.hidden) void refresh();
  });
  start();
  void refresh();
})();
`;

export const BOARD_CSS = `:root { color-scheme: light dark; font-family: system-ui, sans-serif; }
body { margin: 0 auto; max-width: 72rem; padding: 1rem 1.5rem; }
h1 { margin: 0 0 .25rem; font-size: 1.5rem; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
h2 small { font-weight: normal; color: GrayText; }
.hint { color: GrayText; margin: .25rem 0; }
input[type=search] { font: inherit; padding: .25rem .5rem; min-width: 20rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid color-mix(in srgb, CanvasText 15%, transparent); vertical-align: middle; }
td.num { font-variant-numeric: tabular-nums; }
td.key code { word-break: break-all; }
td.remaining, button, .tag { white-space: nowrap; }
meter { width: 8rem; vertical-align: middle; }
.tag { font-size: .75rem; padding: 0 .35rem; border-radius: .5rem; background: color-mix(in srgb, CanvasText 10%, transparent); }
.error { color: #c0392b; }
.empty { color: GrayText; }
#status:empty { display: none; }
button { font: inherit; cursor: pointer; }
`;
