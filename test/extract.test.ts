import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { extractCandidate, fencedBlocks } from "../src/candidate/extract.ts";

const fixtures = join(import.meta.dirname, "fixtures");
const read = (...parts: string[]) => readFileSync(join(fixtures, ...parts), "utf8");

test("seed 000: takes the last complete Python block defining ModelNew (block 6 of 6)", () => {
  const { code, origin } = extractCandidate("000.txt", read("seeds", "000_510f890c0e824915.txt"));
  assert.equal(origin.kind, "transcript");
  assert.equal(origin.blockIndex, 6);
  assert.equal(origin.blockCount, 6);
  assert.match(code ?? "", /class ModelNew\b/);
  assert.match(origin.note ?? "", /block 6 of 6/);
});

test("seed 002: skips the cpp block and takes block 7 of 7", () => {
  const text = read("seeds", "002_e7edf580a2003a0e.txt");
  const blocks = fencedBlocks(text);
  assert.equal(blocks.length, 7);
  assert.ok(blocks.some((b) => b.lang === "cpp"));
  const { code, origin } = extractCandidate("002.txt", text);
  assert.equal(origin.blockIndex, 7);
  assert.match(code ?? "", /load_inline/);
});

test("seed 004: prose with no fenced block yields no code and says why", () => {
  const { code, origin } = extractCandidate("004.txt", read("seeds", "004_81661164eacd2809.txt"));
  assert.equal(code, null);
  assert.equal(origin.blockCount, 0);
  assert.match(origin.note ?? "", /no fenced code block/);
});

test("tilde fences inside lists count; an unclosed trailing fence and non-Python blocks do not", () => {
  const text = read("transcripts", "mixed.md");
  const blocks = fencedBlocks(text);
  assert.equal(blocks.length, 4);
  assert.equal(blocks[3]?.complete, false);
  const { code, origin } = extractCandidate("mixed.md", text);
  assert.equal(origin.blockIndex, 3);
  assert.match(code ?? "", /# final/);
});

test("a transcript whose only ModelNew block is unclosed has no code", () => {
  const { code, origin } = extractCandidate("cut.md", "text\n```python\nclass ModelNew:\n    pass\n");
  assert.equal(code, null);
  assert.match(origin.note ?? "", /unclosed or not Python/);
});

test("a .py file is taken whole; an empty one has no code", () => {
  const full = extractCandidate("m.py", "import torch\nclass ModelNew: pass\n");
  assert.equal(full.origin.kind, "file");
  assert.equal(full.code, "import torch\nclass ModelNew: pass\n");
  const empty = extractCandidate("e.py", "  \n");
  assert.equal(empty.code, null);
  assert.match(empty.origin.note ?? "", /empty/);
});

test("a block that binds ModelNew to a class of another name defines it; a block that only uses it does not", () => {
  const text = [
    "```python",
    "class FusedLinearReLU(nn.Module):",
    "    pass",
    "",
    "",
    "ModelNew = FusedLinearReLU",
    "```",
    "",
    "Usage:",
    "",
    "```python",
    "model = ModelNew(96, 64)",
    "assert type(model) == ModelNew",
    "```",
  ].join("\n");
  const { code, origin } = extractCandidate("alias.md", text);
  assert.equal(origin.blockIndex, 1);
  assert.match(code ?? "", /ModelNew = FusedLinearReLU/);
});

test("a file name after the fence's language (```python:model_new.py) is still a Python block", () => {
  const { code, origin } = extractCandidate(
    "named.md",
    "```python:model_new.py\nclass ModelNew:\n    pass\n```\n",
  );
  assert.equal(origin.blockIndex, 1);
  assert.match(code ?? "", /class ModelNew/);
});
