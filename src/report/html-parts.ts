// Small pieces of report HTML shared by the eval and optimize sections.
import type { Verdict } from "../worker/protocol.ts";
import { VERDICT_COLORS } from "./charts.ts";
import { verdictLabel } from "./format.ts";
import { html, type Part, type Raw, raw } from "./html-escape.ts";

export function verdictBadge(verdict: Verdict): Raw {
  return html`<span class="verdict" style="background:${VERDICT_COLORS[verdict]}">${verdictLabel(verdict)}</span>`;
}

export function chartBlock(title: string, svg: string | null, emptyMessage: string, note?: Part): Raw {
  return html`<figure class="chart"><figcaption>${title}</figcaption>${
    svg ? raw(svg) : html`<div class="no-chart">${emptyMessage}</div>`
  }${note ? html`<div class="muted small">${note}</div>` : ""}</figure>`;
}
