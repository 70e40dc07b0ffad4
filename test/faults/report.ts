import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { holdingIntervals, percentile } from './checker.js';
import type { ScenarioResult } from './scenarios.js';

const fmt = (n: number | undefined): string => (n === undefined ? '–' : String(Math.round(n)));

/** A readable table: one row per scenario. */
export function summaryTable(results: ScenarioResult[]): string {
  const head = ['scenario', 'acq', 'acked', 'unknown', 'stale rejected', 'STALE ACCEPTED', 'token regr.', 'across server faults (grants/regr.)', 'LOST', 'overlaps', 'valid overlaps (unexpl.)', 'losses', 'signal delay p50/p99 ms'];
  const rows = results.map(({ spec, result: r }) => [
    spec.name + (spec.negativeControl ? ' (control)' : ''),
    r.acquisitions,
    r.acknowledgedWrites,
    r.unknownWrites,
    r.staleRejected,
    r.staleAccepted,
    spec.backend === 'redis' || spec.backend === 'redlock' ? '–' : r.tokenRegressions,
    r.acrossServerFaults?.faults ? `${r.acrossServerFaults.grantsChecked}/${r.acrossServerFaults.regressions}` : '–',
    r.lostUpdates,
    r.overlaps,
    `${r.validityOverlaps} (${r.unexplainedOverlaps})`,
    r.lossesSignalled,
    `${fmt(r.signalDelayP50)}/${fmt(r.signalDelayP99)}`,
  ]);
  const table = [head, ...rows].map((row) => row.map(String));
  const widths = head.map((_, i) => Math.max(...table.map((row) => row[i].length)));
  return table.map((row) => row.map((cell, i) => cell.padEnd(widths[i])).join('  ')).join('\n');
}

/** Hand-over times per fault kind: `kind n× median/max ms`. */
export function handOverText(handOvers: Record<string, number[]>): string {
  const parts = Object.entries(handOvers).map(([kind, ms]) => `${kind} ${ms.length}× ${fmt(percentile(ms, 50))}/${fmt(Math.max(...ms))} ms`);
  return parts.length ? parts.join('; ') : '–';
}

/** The semaphore and leader scenarios' own figures: one row each. */
export function semLeaderTable(results: ScenarioResult[]): string {
  const head = ['scenario', 'permits', 'acq / terms', 'OVER-ADMISSION / TERM OVERLAPS', 'max valid at once', 'control (permits−1)', 'acted after expiry', 'token dup/regr.', 'stale refused/ACCEPTED', 'hand-over median/max ms'];
  const rows = results
    .filter((r) => r.semaphore || r.leader)
    .map(({ spec, result: r, semaphore: m, leader: l }) => {
      const fencing = spec.backend !== 'redis' && spec.backend !== 'redlock';
      return m
        ? [spec.name, m.permits, m.acquisitions, m.overAdmission, m.maxHolders, m.overAdmissionAtPermitsMinus1, m.actedAfterExpiry, fencing ? `${m.tokenDuplicates}/${m.tokenRegressions}` : '–', '–', '–']
        : [spec.name + (spec.negativeControl ? ' (control)' : ''), 1, l!.terms, l!.termOverlaps, '–', '–', l!.actedAfterExpiry, fencing ? `${l!.tokenDuplicates}/${l!.tokenRegressions}` : '–', spec.fenced ? `${r.staleRejected}/${r.staleAccepted}` : `–/${r.lostUpdates} lost`, handOverText(l!.handOvers)];
    });
  if (rows.length === 0) return '';
  const table = [head, ...rows].map((row) => row.map(String));
  const widths = head.map((_, i) => Math.max(...table.map((row) => row[i].length)));
  return table.map((row) => row.map((cell, i) => cell.padEnd(widths[i])).join('  ')).join('\n');
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** One SVG timeline per scenario: workers as rows, leases held, pauses/faults, writes. */
function timeline(r: ScenarioResult): string {
  const width = 1100;
  const left = 70;
  const rowH = 34;
  const end = Math.max(r.elapsedMs, 1);
  const x = (t: number): number => left + (Math.min(t, end) / end) * (width - left - 10);
  const workers = r.spec.workers;
  const top = 24;
  const height = top + workers * rowH + 40;
  const parts: string[] = [];
  for (let w = 0; w < workers; w++) {
    const y = top + w * rowH;
    parts.push(`<text x="4" y="${y + 20}" font-size="12">worker ${w}</text>`);
    parts.push(`<line x1="${left}" x2="${width - 10}" y1="${y + 16}" y2="${y + 16}" stroke="#ddd"/>`);
  }
  for (const f of r.faults) {
    const x1 = x(f.t);
    const x2 = x(f.end ?? f.t + 30);
    if (f.worker !== undefined) {
      const y = top + f.worker * rowH;
      parts.push(`<rect x="${x1}" y="${y + 2}" width="${Math.max(2, x2 - x1)}" height="28" fill="#f5c542" opacity="0.45"><title>${esc(f.kind)} ${esc(f.detail ?? '')}</title></rect>`);
    } else {
      parts.push(`<rect x="${x1}" y="${top - 4}" width="${Math.max(2, x2 - x1)}" height="${workers * rowH + 4}" fill="#e05d5d" opacity="0.15"><title>${esc(f.kind)} ${esc(f.detail ?? '')}</title></rect>`);
    }
  }
  for (const iv of holdingIntervals(r.history)) {
    const y = top + iv.worker * rowH;
    parts.push(`<rect x="${x(iv.start)}" y="${y + 10}" width="${Math.max(1, x(iv.end) - x(iv.start))}" height="12" fill="#4a7bd0"><title>held, token ${iv.token ?? '–'}</title></rect>`);
  }
  const marks: Record<string, string> = { 'write-ok': '#2e9e4f', 'write-stale': '#d32f2f', 'read-stale': '#d32f2f', 'write-unknown': '#777', lost: '#000', killed: '#8e24aa' };
  for (const ev of r.history) {
    const color = marks[ev.e];
    if (!color) continue;
    const y = top + ev.worker * rowH;
    const shape = ev.e === 'lost' ? `<path d="M${x(ev.t) - 4} ${y + 26} l4 -7 l4 7 z" fill="${color}"/>` : `<circle cx="${x(ev.t)}" cy="${y + 16}" r="3.5" fill="${color}"/>`;
    parts.push(`<g><title>${esc(ev.e)} ${esc(ev.el ?? '')} token ${esc(ev.token ?? '–')}</title>${shape}</g>`);
  }
  parts.push(`<text x="${left}" y="${height - 12}" font-size="11" fill="#555">0 s</text><text x="${width - 60}" y="${height - 12}" font-size="11" fill="#555">${(end / 1000).toFixed(1)} s</text>`);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">${parts.join('')}</svg>`;
}

/** Write history JSON per scenario, summary.txt and a self-contained report.html. Returns the folder. */
export function writeReport(results: ScenarioResult[], dir: string): string {
  mkdirSync(dir, { recursive: true });
  for (const r of results) writeFileSync(path.join(dir, `history-${r.spec.name}.json`), JSON.stringify(r, null, 1));
  const semLeader = semLeaderTable(results);
  const table = summaryTable(results) + (semLeader ? `\n\nsemaphores and leaders:\n${semLeader}` : '');
  writeFileSync(path.join(dir, 'summary.txt'), `${table}\n`);
  const sections = results
    .map(
      (r) => `<section><h2>${esc(r.spec.name)}${r.spec.negativeControl ? ' — negative control' : ''}</h2><p>${esc(r.spec.description)}</p>
<p>${Object.entries({ ...r.result, ...(r.semaphore ?? {}), ...(r.leader ?? {}) }).map(([k, v]) => `<b>${esc(k)}</b> ${esc(typeof v === 'object' ? JSON.stringify(v, (_, x: unknown) => (typeof x === 'bigint' ? String(x) : x)) : String(v ?? '–'))}`).join(' · ')}</p>${timeline(r)}</section>`,
    )
    .join('\n');
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>nest-distributed-lock fault report</title>
<style>body{font-family:sans-serif;margin:24px;max-width:1160px}pre{background:#f6f6f6;padding:12px;overflow:auto}section{margin-top:28px}</style></head>
<body><h1>Fault report</h1><p>Blue: lease held (acquired → released). Yellow: the worker was paused or cut off. Red band: a cluster-wide fault.
Dots: green write accepted, red write/read refused as stale, grey outcome unknown (timed out). Triangle: the lease's loss was signalled. Purple dot: the worker was killed (kill -9).</p>
<pre>${esc(table)}</pre>${sections}</body></html>`;
  writeFileSync(path.join(dir, 'report.html'), html);
  return dir;
}
