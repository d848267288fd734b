// The HTML report in a real browser: Debian's chromium, headless, driven by playwright-core. Renders the
// report from the fixture results, opens it offline, and checks the rows, the charts and the console.
// CI installs chromium with scripts/install-chromium.sh. UPDATE_SCREENSHOT=1 writes the screenshot to
// docs/report.png (and docs/report-roofline.png) instead of a temporary folder.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { writeHtmlReport } from "../src/report/html.ts";
import { loadResultsFiles } from "../src/report/load.ts";

const CHROMIUM = "/usr/bin/chromium";
const FIXTURES = join(import.meta.dirname, "fixtures", "results");
const SCREENSHOT = join(import.meta.dirname, "..", "docs", "report.png");
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const skip = existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} not found: install Debian's chromium (sh scripts/install-chromium.sh) to run the browser test`;

interface OpenReport {
  context: BrowserContext;
  page: Page;
  /** Console errors and warnings, page errors, failed requests. */
  problems: string[];
  requests: string[];
}

/** Opens a report offline in a fresh profile (nothing cached, nothing from an earlier test). */
async function openReport(reportFile: string, profile: string): Promise<OpenReport> {
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 1000 },
    offline: true,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const problems: string[] = [];
  const requests: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
  page.on("request", (r) => requests.push(r.url()));
  await page.goto(pathToFileURL(reportFile).href, { waitUntil: "load" });
  return { context, page, problems, requests };
}

describe("HTML report in headless Chromium", { skip }, () => {
  const files = readdirSync(FIXTURES)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => join(FIXTURES, f));
  const { results } = loadResultsFiles(files);
  const work = mkdtempSync(join(tmpdir(), "kforge-browser-"));
  const reportFile = join(work, "report.html");
  let context: BrowserContext;
  let page: Page;
  let problems: string[] = [];
  let requests: string[] = [];

  before(async () => {
    writeHtmlReport(results, reportFile, { title: "kforge report: fixtures", sourceDirs: [FIXTURES] });
    ({ context, page, problems, requests } = await openReport(reportFile, join(work, "profile")));
  });

  after(async () => {
    await context?.close();
    rmSync(work, { recursive: true, force: true });
  });

  test("shows a summary row for every result, under its problem", async () => {
    const rows = await page.$$eval("tr.result-row", (trs) =>
      trs.map((tr) => ({
        problem: tr.getAttribute("data-problem"),
        candidate: tr.getAttribute("data-candidate"),
        verdict: tr.querySelector(".verdict")?.textContent,
        speedup: tr.querySelectorAll("td")[2]?.textContent,
        visible: (tr as HTMLElement).offsetHeight > 0,
      })),
    );
    assert.equal(rows.length, results.length);
    for (const r of results) {
      const row = rows.find((x) => x.candidate === r.candidate && x.problem === r.problem);
      assert.ok(row, `row for ${r.problem} / ${r.candidate}`);
      assert.equal(row.verdict, r.verdict.replaceAll("_", " "));
      assert.ok(row.visible);
    }
    const sdpa = rows.find((x) => x.candidate === "sdpa_fp16.kforge.py");
    assert.equal(sdpa?.speedup, "1.91× (1.88–1.93)");
    const headings = await page.$$eval("section.problem h3", (hs) => hs.map((h) => h.textContent));
    assert.deepEqual(headings, [...new Set(results.map((r) => r.problem))]);
  });

  test("draws every chart as a visible SVG with real marks in it", async () => {
    const charts = await page.$$eval("figure.chart", (figs) =>
      figs.map((f) => {
        const svg = f.querySelector("svg");
        const box = svg?.getBoundingClientRect();
        return {
          caption: f.querySelector("figcaption")?.textContent ?? "",
          width: box?.width ?? 0,
          height: box?.height ?? 0,
          marks: svg ? svg.querySelectorAll("path, rect").length : 0,
          text: svg?.textContent ?? "",
          empty: f.querySelector(".no-chart")?.textContent ?? null,
        };
      }),
    );
    const timedProblems = [...new Set(results.filter((r) => r.timing).map((r) => r.problem))];
    assert.deepEqual(
      charts.map((c) => c.caption),
      [
        "Speedup",
        ...[...new Set(results.map((r) => r.problem))].map((p) => `Timing: ${p}`),
        "Roofline on H100 80GB HBM3",
      ],
    );
    for (const c of charts) {
      const timed =
        c.caption === "Speedup" ||
        c.caption.startsWith("Roofline") ||
        timedProblems.some((p) => c.caption.endsWith(p));
      if (!timed) continue;
      assert.equal(c.empty, null, `${c.caption} drawn`);
      assert.ok(c.width > 300 && c.height > 150, `${c.caption} is laid out (${c.width}×${c.height})`);
      assert.ok(c.marks > 10, `${c.caption} has marks`);
    }
    const speedup = charts[0];
    // Long labels are shortened in the chart; their start must be there.
    for (const r of results.filter((x) => x.timing)) {
      assert.ok(speedup?.text.includes(r.candidate.slice(0, 20)), r.candidate);
    }
    assert.match(speedup?.text ?? "", /1\.91×/);
    const roofline = charts.at(-1);
    assert.match(roofline?.text ?? "", /sdpa_fp16 floor 1\.46 ms/);
    assert.match(roofline?.text ?? "", /778 TFLOP\/s/);
    // Hover text rides on the marks as SVG <title> elements (no script needed).
    const tooltips = await page.$$eval("figure.chart svg title", (ts) => ts.map((t) => t.textContent ?? ""));
    assert.ok(tooltips.some((t) => t.startsWith("sdpa_fp16.kforge.py on sdpa_fp16: correct, 1.91×")));
    assert.ok(tooltips.some((t) => /^PyTorch \(timed beside .*\): median/.test(t)));
  });

  test("opens the evidence: compile log, failed checks, extracted code", async () => {
    const compileError = results.findIndex((r) => r.verdict === "compile_error");
    const details = page.locator(`#result-${compileError + 1}`);
    await details.locator("summary").first().click();
    assert.equal(await details.evaluate((d) => (d as HTMLDetailsElement).open), true);
    const log = details.locator("details.log pre.excerpt");
    assert.ok(await log.isVisible());
    assert.match((await log.textContent()) ?? "", /error: no suitable conversion function from "__half"/);
    const code = details.locator("details.code");
    await code.locator("summary").click();
    assert.match((await code.locator("pre").textContent()) ?? "", /class ModelNew/);
    const cheat = results.findIndex((r) => r.verdict === "cheating");
    const failed = await page.$$eval(`#result-${cheat + 1} .check-table .check.fail`, (els) => els.length);
    assert.equal(failed, 1);
  });

  test("loads nothing from the network and logs no errors", async () => {
    await page.reload({ waitUntil: "load" });
    assert.deepEqual(
      requests.filter((u) => !u.startsWith("file:")),
      [],
    );
    assert.deepEqual(problems, []);
  });

  test("renders to a screenshot (UPDATE_SCREENSHOT=1 also refreshes docs/report.png)", async () => {
    const update = Boolean(process.env.UPDATE_SCREENSHOT);
    const target = update ? SCREENSHOT : join(work, "report.png");
    // What a reader sees first: the verdicts, the speedup chart and the first problem's table.
    const bottom = await page.evaluate(() => {
      const first = document.querySelector("section.problem");
      return Math.ceil((first?.getBoundingClientRect().bottom ?? 1400) + window.scrollY + 12);
    });
    await page.screenshot({
      path: target,
      clip: { x: 0, y: 0, width: 1280, height: bottom },
      fullPage: true,
    });
    const roofline = page.locator("figure.chart").last();
    await roofline.screenshot({ path: target.replace("report.png", "report-roofline.png") });
    const png = readFileSync(target);
    assert.equal(png.subarray(1, 4).toString(), "PNG");
    assert.equal(png.readUInt32BE(16), 1280, "full width");
    assert.ok(png.readUInt32BE(20) > 600, "header, chart and a table");
  });
});

describe("kforge optimize report in headless Chromium", { skip }, () => {
  const dir = join(FIXTURES, "optimize");
  const data = loadResultsFiles(
    readdirSync(dir)
      .filter((f) => f.endsWith(".json"))
      .sort()
      .map((f) => join(dir, f)),
  );
  const work = mkdtempSync(join(tmpdir(), "kforge-browser-optimize-"));
  const reportFile = join(work, "optimize.html");
  let context: BrowserContext;
  let page: Page;
  let problems: string[] = [];
  let requests: string[] = [];

  before(async () => {
    writeHtmlReport(data, reportFile, { title: "kforge optimize: fixtures" });
    ({ context, page, problems, requests } = await openReport(reportFile, join(work, "profile")));
  });

  after(async () => {
    await context?.close();
    rmSync(work, { recursive: true, force: true });
  });

  test("shows a visible overview row and a section with its regions for every problem", async () => {
    const rows = await page.$$eval("tr.optimize-row", (trs) =>
      trs.map((tr) => ({
        problem: tr.getAttribute("data-problem"),
        cells: [...tr.querySelectorAll("td")].map((td) => td.textContent?.trim() ?? ""),
        visible: (tr as HTMLElement).offsetHeight > 0,
      })),
    );
    assert.deepEqual(
      rows.map((r) => r.problem),
      data.optimize.map((r) => r.problem),
    );
    assert.ok(rows.every((r) => r.visible));
    const swish = rows.find((r) => r.problem === "swish_scale_residual");
    assert.deepEqual(swish?.cells.slice(1, 7), ["correct", "1.47", "0.633", "0.582", "2.52×", "1.09×"]);
    const regions = await page.$$eval("section.optimize-problem", (sections) =>
      sections.map((s) => s.querySelectorAll("tr.region-row").length),
    );
    assert.deepEqual(
      regions,
      data.optimize.map((r) => r.regions.length),
    );
    const kept = await page.$$eval("tr.kept-row td:last-child", (tds) => tds.map((td) => td.textContent));
    assert.deepEqual(
      kept,
      data.optimize.flatMap((r) => r.kept.map((k) => k.reason)),
    );
  });

  test("draws the speedup chart with a pair of bars per timed problem, offline and without errors", async () => {
    const chart = await page.$eval("figure.chart", (f) => {
      const svg = f.querySelector("svg");
      const box = svg?.getBoundingClientRect();
      return { width: box?.width ?? 0, height: box?.height ?? 0, text: svg?.textContent ?? "" };
    });
    assert.ok(chart.width > 300 && chart.height > 300, `${chart.width}×${chart.height}`);
    for (const r of data.optimize.filter((x) => x.verdict === "correct")) {
      assert.ok(chart.text.includes(r.problem), r.problem);
      assert.ok(chart.text.includes(`${r.speedup?.toFixed(2)}×`), `${r.problem} vs eager`);
    }
    assert.deepEqual(
      requests.filter((u) => !u.startsWith("file:")),
      [],
    );
    assert.deepEqual(problems, []);
  });
});
