/**
 * plots.html: one self-contained page with every figure of a run (the SVGs inline, no script, no
 * network), so a browser opened on the run directory shows the run at a glance.
 */

/** What the page shows. */
export interface PlotsPageContent {
  readonly title: string;
  /** The figures in order: anchor name, heading, SVG text. */
  readonly figures: readonly { readonly name: string; readonly title: string; readonly svg: string }[];
  /** Short lines under the heading (axes, rows). */
  readonly notes: readonly string[];
}

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

const STYLE = `
body { font-family: "DejaVu Sans", system-ui, sans-serif; margin: 0; color: #222; background: #f6f6f4; }
header { padding: 16px 24px 8px; background: white; border-bottom: 1px solid #ddd; }
h1 { font-size: 20px; margin: 0 0 4px; }
header p { margin: 2px 0; color: #555; font-size: 13px; }
nav a { margin-right: 14px; font-size: 13px; }
main { display: flex; flex-wrap: wrap; gap: 16px; padding: 16px; align-items: flex-start; }
section { background: white; border: 1px solid #ddd; border-radius: 4px; padding: 4px; }
section svg { display: block; max-width: 100%; height: auto; }
`;

/** The page's HTML. */
export function plotsPage(content: PlotsPageContent): string {
  const nav = content.figures.map((f) => `<a href="#${escapeHtml(f.name)}">${escapeHtml(f.title)}</a>`).join('');
  const sections = content.figures
    // The SVG carries the figure's title.
    .map((f) => `<section id="${escapeHtml(f.name)}" aria-label="${escapeHtml(f.title)}">\n${f.svg}\n</section>`)
    .join('\n');
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    // No favicon request: a page opened from disk would log a failed fetch for it.
    '<link rel="icon" href="data:,">',
    `<title>${escapeHtml(content.title)}</title>`,
    `<style>${STYLE}</style>`,
    '</head>',
    '<body>',
    `<header><h1>${escapeHtml(content.title)}</h1>`,
    ...content.notes.map((n) => `<p>${escapeHtml(n)}</p>`),
    `<nav>${nav}</nav></header>`,
    `<main>\n${sections}\n</main>`,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
