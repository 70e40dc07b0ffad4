// What the docs test reads out of a markdown page: fenced samples, relative links, heading anchors.
// Pure functions of the text, so that their own spec (markdown.spec.ts) can hold them to GitHub's rules.
import { join } from 'node:path';

export interface Sample {
  line: number;
  lang: string;
  code: string;
}

export interface Link {
  line: number;
  target: string;
}

/** Every fenced block (indented ones too), with its language and the line it opens on. */
export function samplesOf(markdown: string): Sample[] {
  const found: Sample[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const indent = open[1].length;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j])) body.push(lines[j++].slice(indent));
    found.push({ line: i + 1, lang: open[2], code: body.join('\n') + '\n' });
    i = j;
  }
  return found;
}

/** The lines outside fenced blocks, with their numbers. */
function proseOf(markdown: string): Array<[number, string]> {
  const out: Array<[number, string]> = [];
  let fenced = false;
  markdown.split('\n').forEach((line, i) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return;
    }
    if (!fenced) out.push([i + 1, line]);
  });
  return out;
}

/** Inline links and images `[text](target)` and `<a href="target">`, outside code. */
export function linksOf(markdown: string): Link[] {
  const links: Link[] = [];
  for (const [line, raw] of proseOf(markdown)) {
    const text = raw.replace(/`[^`]*`/g, (span) => ' '.repeat(span.length)); // a link in a code span is text
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ line, target: m[1] });
    for (const m of text.matchAll(/<a\s[^>]*href="([^"]+)"/g)) links.push({ line, target: m[1] });
  }
  return links;
}

/** GitHub's anchor for a heading's text: its rendered text lower-cased, punctuation dropped, spaces to hyphens. */
export function slugOf(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link or an image: its text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/[`*]/g, '') // code spans and emphasis
    .trim()
    .toLowerCase();
  return rendered.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** Every anchor a page has: one per heading (a repeated one gets -1, -2, …), and explicit `<a id>`/`<a name>`. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, line] of proseOf(markdown)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = slugOf(heading[1]);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const m of line.matchAll(/<a\s[^>]*(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  }
  return anchors;
}

/** README.md, CHANGELOG.md and every .md file under docs/, as paths relative to `root`, sorted. */
export function pagesOf(root: string, list: (dir: string) => string[], isDirectory: (path: string) => boolean): string[] {
  const found = ['README.md', 'CHANGELOG.md'];
  const walk = (dir: string): void => {
    for (const name of list(join(root, dir))) {
      const path = `${dir}/${name}`;
      if (isDirectory(join(root, path))) walk(path);
      else if (name.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  return found.sort();
}
