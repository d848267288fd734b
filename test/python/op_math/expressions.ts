// Reads op-math cases (JSON on stdin: [{op, kind, fn, sizes?}]) and prints the fp32 C++ each rule table
// entry generates for them, operands named x[0], x[1], ...: the input of test_op_math.py, which compiles
// them for the host and compares them with PyTorch. The tables' op names come along, so the test can tell
// an op that has no case.
import { readFileSync } from "node:fs";
import type { Arg } from "../../../src/optimize/graph.ts";
import { NORMALIZATIONS } from "../../../src/optimize/ops/normalize.ts";
import { floatLiteral, POINTWISE, scalarValue } from "../../../src/optimize/ops/pointwise.ts";
import { accumulatorOf, REDUCTIONS } from "../../../src/optimize/ops/reduce.ts";
import { paramReader } from "../../../src/optimize/plan/graph-view.ts";

interface Case {
  op: string;
  kind: "pointwise" | "reduce" | "normalize";
  fn: Record<string, Arg>;
  sizes?: Record<string, number[]>;
}

const cases = JSON.parse(readFileSync(0, "utf8")) as Case[];
const out = cases.map((c) => {
  const sizeOf = (arg: Arg, dim: number) => {
    const key = Object.entries(c.fn).find(([, v]) => v === arg)?.[0];
    const size = key ? c.sizes?.[key]?.[dim] : undefined;
    return size === undefined ? null : `${size}.f`;
  };
  const reader = paramReader(c.fn, () => null, sizeOf);
  if (c.kind === "pointwise") {
    const spec = POINTWISE[c.op];
    if (!spec) return { op: c.op, error: "no pointwise rule" };
    let k = 0;
    const operands = spec.operands.map((key) => {
      const arg = c.fn[key];
      if (!arg || (arg.t === "const" && arg.pytype === "none")) return "";
      if (arg.t === "const") return floatLiteral(scalarValue(arg) ?? Number.NaN);
      return `x[${k++}]`;
    });
    return { op: c.op, expr: spec.emit(operands, reader), inputs: k };
  }
  if (c.kind === "normalize") {
    const norm = NORMALIZATIONS[c.op];
    if (!norm) return { op: c.op, error: "no normalisation rule" };
    let k = 1;
    const params = norm.params.map(({ key }) => {
      const arg = c.fn[key];
      return !arg || (arg.t === "const" && arg.pytype === "none") ? "" : `x[${k++}]`;
    });
    return {
      op: c.op,
      stat: norm.stat,
      value: norm.value ? norm.value("x[0]", reader) : "x[0]",
      apply: norm.apply("v", params, reader),
      inputs: k,
    };
  }
  const spec = REDUCTIONS[c.op];
  if (!spec) return { op: c.op, error: "no reduction rule" };
  let k = 0;
  const operands = spec.operands.map((key) => {
    const arg = c.fn[key];
    return !arg || (arg.t === "const" && arg.pytype === "none") ? "" : `x[${k++}]`;
  });
  return {
    op: c.op,
    acc: accumulatorOf(spec, reader),
    value: spec.value ?? "float",
    pro: spec.pro(operands, reader),
    epi: spec.epi(reader),
    inputs: k,
  };
});
process.stdout.write(
  JSON.stringify({
    cases: out,
    pointwise: Object.keys(POINTWISE),
    reductions: Object.keys(REDUCTIONS),
    normalizations: Object.keys(NORMALIZATIONS),
  }),
);
