import { escapeHtml, formatMs, type BoardBackend, type BoardLock, type BoardView } from './board-view.js';

/**
 * The page's headers. Nothing but this origin: no inline script or style (the remaining-time bar
 * is a `<meter>`, not a styled div), no frames, no forms, no plugins — a key that slips past the
 * escaping still cannot run or load anything.
 */
export const BOARD_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The columns, in the order the server and the script render them. */
const COLUMNS = ['Key', 'Purpose', 'Token', 'Held for', 'Remaining', 'Waiters'];

function row(lock: BoardLock, readOnly: boolean): string {
  const cells = [
    `<td class="key"><code>${escapeHtml(lock.key)}</code>${lock.local ? ' <span class="tag">this process</span>' : ''}${lock.permits ? ` <span class="tag">${lock.holders}/${lock.permits} permits</span>` : ''}</td>`,
    `<td>${escapeHtml(lock.purpose)}</td>`,
    `<td class="num">${lock.token === null ? '—' : escapeHtml(lock.token)}</td>`,
    `<td class="num">${formatMs(lock.heldForMs)}</td>`,
    `<td class="remaining"><meter min="0" max="${lock.remainingMs}" value="${lock.remainingMs}"></meter> <span>${formatMs(lock.remainingMs)}</span></td>`,
    `<td class="num">${lock.waiters}</td>`,
  ];
  if (!readOnly) cells.push(`<td><button type="button" data-action="release" data-key="${escapeHtml(lock.key)}" data-backend="${escapeHtml(lock.backend)}">Force release</button></td>`);
  return `<tr data-key="${escapeHtml(lock.key)}">${cells.join('')}</tr>`;
}

function section(backend: BoardBackend, readOnly: boolean): string {
  const head = [...COLUMNS, ...(readOnly ? [] : [''])].map((c) => `<th scope="col">${c}</th>`).join('');
  const body = backend.error
    ? `<p class="error">${escapeHtml(backend.error)}</p>`
    : backend.locks.length === 0
      ? '<p class="empty">No lock held.</p>'
      : '';
  return `<section data-backend="${escapeHtml(backend.name)}">
<h2>${escapeHtml(backend.name)} <small>${escapeHtml(backend.purposes.join(', ') || 'no purpose routed here')}</small></h2>
${body}<table${backend.locks.length === 0 ? ' hidden' : ''}><thead><tr>${head}</tr></thead><tbody>${backend.locks.map((l) => row(l, readOnly)).join('')}</tbody></table>
</section>`;
}

/** The whole page, rendered with the current locks; board.js keeps it current. `base`: the page's own URL path. */
export function renderBoardPage(view: BoardView, base: string): string {
  const b = escapeHtml(base);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Locks — nest-distributed-lock</title>
<link rel="stylesheet" href="${b}/board.css">
<script src="${b}/board.js" defer></script>
</head><body>
<main id="board" data-api="${b}/api/locks" data-read-only="${view.readOnly}" data-refresh-ms="${view.refreshMs}">
<header><h1>Locks</h1><p class="hint">Held now, newest first. ${view.readOnly ? 'Read-only.' : 'A forced release tells the holder (its signal aborts); on a fencing backend the next holder’s token is larger, so a late write of the old one is refused.'}</p>
<label>Filter <input id="filter" type="search" placeholder="key contains…" autocomplete="off"></label>
<p id="status" role="status"></p><p id="updated" class="hint">Updated ${escapeHtml(view.at)}</p></header>
${view.backends.map((backend) => section(backend, view.readOnly)).join('\n')}
</main></body></html>`;
}
