// Turns what a user points at — a .py file or an LLM answer in markdown / plain text — into candidate code.
import { lexer, type Token, type Tokens } from "marked";
import type { CandidateOrigin } from "../worker/protocol.ts";

export interface CodeBlock {
  /** 1-based position among all fenced blocks of the document. */
  index: number;
  lang: string;
  text: string;
  /** False when the fence is never closed (a transcript cut off mid-block). */
  complete: boolean;
}

export interface ExtractedCandidate {
  /** The code to evaluate, or null when the source holds no usable ModelNew. */
  code: string | null;
  origin: CandidateOrigin;
}

// `class ModelNew` or a top-level binding of the name (`ModelNew = FusedLinearReLU`, as answers that name their
// class after what it does end), never a comparison or a use (`model = ModelNew(...)`).
const DEFINES_MODEL_NEW = /^(?:[ \t]*class[ \t]+ModelNew\b|ModelNew[ \t]*(?::[^=\n]*)?=(?!=))/m;
const PYTHON_LANGS = new Set(["", "python", "py", "python3"]);
// The info string's language, without a file name some answers attach to it (```python:model_new.py).
const fenceLanguage = (info: string): string =>
  (info.trim().split(/\s+/)[0] ?? "").split(":")[0]?.toLowerCase() ?? "";

function isClosedFence(raw: string): boolean {
  const lines = raw.trimEnd().split("\n");
  const open = /^[ \t]*(`{3,}|~{3,})/.exec(lines[0] ?? "")?.[1];
  const close = /^[ \t]*(`{3,}|~{3,})[ \t]*$/.exec(lines.at(-1) ?? "")?.[1];
  // A closing fence repeats the opening character at least as many times, on a line of its own.
  return lines.length > 1 && !!open && !!close && close[0] === open[0] && close.length >= open.length;
}

/** All fenced code blocks, in document order, including those nested in lists and block quotes. */
export function fencedBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const visit = (tokens: Token[]): void => {
    for (const token of tokens) {
      if (token.type === "code") {
        const code = token as Tokens.Code;
        if (code.codeBlockStyle === "indented") continue;
        blocks.push({
          index: blocks.length + 1,
          lang: fenceLanguage(code.lang ?? ""),
          text: code.text,
          complete: isClosedFence(code.raw),
        });
        continue;
      }
      const nested = token as { tokens?: Token[]; items?: Tokens.ListItem[] };
      if (nested.items) for (const item of nested.items) visit(item.tokens);
      if (nested.tokens) visit(nested.tokens);
    }
  };
  visit(lexer(markdown));
  return blocks;
}

/**
 * A .py file is taken whole. Anything else is read as a transcript: the last complete Python block that
 * defines ModelNew is the candidate, and the origin says which block of how many was taken.
 */
export function extractCandidate(sourcePath: string, content: string): ExtractedCandidate {
  if (sourcePath.endsWith(".py")) {
    const code = content.trim() === "" ? null : content;
    return {
      code,
      origin: {
        kind: "file",
        sourcePath,
        blockIndex: null,
        blockCount: null,
        note: code === null ? "the file is empty" : null,
      },
    };
  }
  const blocks = fencedBlocks(content);
  const usable = blocks.filter(
    (b) => PYTHON_LANGS.has(b.lang) && b.complete && DEFINES_MODEL_NEW.test(b.text),
  );
  const chosen = usable.at(-1);
  const origin: CandidateOrigin = {
    kind: "transcript",
    sourcePath,
    blockIndex: chosen?.index ?? null,
    blockCount: blocks.length,
    note: chosen
      ? `took block ${chosen.index} of ${blocks.length} (the last complete Python block defining ModelNew)`
      : describeMissing(blocks),
  };
  return { code: chosen?.text ?? null, origin };
}

function describeMissing(blocks: CodeBlock[]): string {
  if (blocks.length === 0) return "no fenced code block in the transcript";
  const defining = blocks.filter((b) => DEFINES_MODEL_NEW.test(b.text));
  if (defining.length === 0) return `none of the ${blocks.length} code blocks defines class ModelNew`;
  return `the ${defining.length} block(s) defining ModelNew are unclosed or not Python`;
}
