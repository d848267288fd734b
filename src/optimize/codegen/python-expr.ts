// Captured nodes back to Python source: each PyTorch call the plan keeps is emitted as the reference wrote
// it (module calls through `self`, functions by their qualified name, methods on their receiver, operators
// infix), so the emitted forward reads like the original.
import type { Arg, GraphNode } from "../graph.ts";

/** How a node value or forward input is named in emitted code. */
export type NameOf = (id: string) => string;

const INFIX: Record<string, string> = {
  "operator.add": "+",
  "operator.sub": "-",
  "operator.mul": "*",
  "operator.truediv": "/",
  "operator.floordiv": "//",
  "operator.mod": "%",
  "operator.pow": "**",
  "operator.matmul": "@",
  "operator.and_": "&",
  "operator.or_": "|",
  "operator.xor": "^",
  "operator.lshift": "<<",
  "operator.rshift": ">>",
  "operator.eq": "==",
  "operator.ne": "!=",
  "operator.lt": "<",
  "operator.le": "<=",
  "operator.gt": ">",
  "operator.ge": ">=",
  "operator.iadd": "+=",
  "operator.isub": "-=",
  "operator.imul": "*=",
  "operator.itruediv": "/=",
};
/** The in-place forms among INFIX's (`==`, `<=` also end in `=`, and are comparisons). */
const AUGMENTED = new Set(["+=", "-=", "*=", "/="]);

const PREFIX: Record<string, string> = {
  "operator.neg": "-",
  "operator.pos": "+",
  "operator.invert": "~",
  "operator.not_": "not ",
};

/** The emitted file's own name for the `operator` module (a problem rarely imports it; fx records `abs(x)` as
 * operator.abs). */
export const OPERATOR_MODULE = "_kf_operator";

/** A function's qualified name as the emitted file reaches it. */
function qualified(target: string): string {
  return target.startsWith("operator.") ? `${OPERATOR_MODULE}${target.slice("operator".length)}` : target;
}

/** `a.b.0.c` -> `self.a.b[0].c` (numbered children of Sequential/ModuleList). */
export function selfPath(path: string): string {
  return path
    .split(".")
    .map((part) =>
      /^\d+$/.test(part)
        ? `[${part}]`
        : /^[A-Za-z_]\w*$/.test(part)
          ? `.${part}`
          : `[${JSON.stringify(part)}]`,
    )
    .reduce((acc, part) => acc + part, "self");
}

/** The emitted forward's name for the device its inputs are on (see runDeviceLine in model-file.ts). */
export const RUN_DEVICE = "_kf_device";

export function pyScalar(arg: Extract<Arg, { t: "const" }>, useAttrs = true): string {
  if (useAttrs && arg.attr) return selfPath(arg.attr);
  if (arg.special === "inf") return 'float("inf")';
  if (arg.special === "-inf") return 'float("-inf")';
  if (arg.special === "nan") return 'float("nan")';
  switch (arg.pytype) {
    case "none":
      return "None";
    case "bool":
      return arg.value ? "True" : "False";
    case "int":
      return String(arg.value);
    case "float": {
      const text = String(arg.value);
      return /[.eE]/.test(text) ? text : `${text}.0`;
    }
    case "str":
      return JSON.stringify(arg.value);
    case "dtype":
      return `torch.${String(arg.value)}`;
    case "device":
      // Capture runs on meta, so a meta device is the one the model ran on (torch.export bakes
      // `device=x.device` in as meta): at run time, the inputs' device.
      return arg.value === "meta" ? RUN_DEVICE : `torch.device(${JSON.stringify(arg.value)})`;
    case "ellipsis":
      return "...";
    default:
      return String(arg.value);
  }
}

export function pyArg(arg: Arg, nameOf: NameOf): string {
  switch (arg.t) {
    case "node":
      return nameOf(arg.id);
    case "param":
      return selfPath(arg.path);
    case "const":
      return pyScalar(arg);
    case "list": {
      const items = arg.items.map((item) => pyArg(item, nameOf));
      if (arg.kind === "list") return `[${items.join(", ")}]`;
      return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
    }
    case "slice":
      return `slice(${pyArg(arg.start, nameOf)}, ${pyArg(arg.stop, nameOf)}, ${pyArg(arg.step, nameOf)})`;
    case "dict":
      return `{${arg.keys.map((k, i) => `${pyArg(k, nameOf)}: ${pyArg(arg.values[i] ?? k, nameOf)}`).join(", ")}}`;
  }
}

function callArgs(node: GraphNode, nameOf: NameOf, skipFirst = false): string {
  const positional = (skipFirst ? node.args.slice(1) : node.args).map((a) => pyArg(a, nameOf));
  const keywords = Object.entries(node.kwargs).map(([k, v]) => `${k}=${pyArg(v, nameOf)}`);
  return [...positional, ...keywords].join(", ");
}

function subscript(arg: Arg, nameOf: NameOf): string {
  if (arg.t === "slice") {
    const part = (a: Arg) => (a.t === "const" && a.pytype === "none" ? "" : pyArg(a, nameOf));
    const step = part(arg.step);
    return `${part(arg.start)}:${part(arg.stop)}${step ? `:${step}` : ""}`;
  }
  if (arg.t === "list" && arg.kind === "tuple")
    return arg.items.map((item) => subscript(item, nameOf)).join(", ") || "()";
  return pyArg(arg, nameOf);
}

/** The Python expression computing `node` (the right-hand side of its assignment). */
export function pyCall(node: GraphNode, nameOf: NameOf): string {
  const [first, second] = node.args;
  switch (node.kind) {
    case "get_attr":
      return selfPath(node.target);
    case "call_module":
      return `${selfPath(node.target)}(${callArgs(node, nameOf)})`;
    case "call_method":
      if (!first) throw new Error(`kforge internal: method ${node.target} without a receiver`);
      return `${pyArg(first, nameOf)}.${node.target}(${callArgs(node, nameOf, true)})`;
    case "call_function": {
      if (node.target === "operator.getitem" && first && second)
        return `${pyArg(first, nameOf)}[${subscript(second, nameOf)}]`;
      const infix = INFIX[node.target];
      if (infix && first && second && node.args.length === 2 && !AUGMENTED.has(infix))
        return `(${pyArg(first, nameOf)} ${infix} ${pyArg(second, nameOf)})`;
      const prefix = PREFIX[node.target];
      if (prefix && first && node.args.length === 1) return `(${prefix}${pyArg(first, nameOf)})`;
      if (node.target === "getattr" && first && second)
        return `getattr(${pyArg(first, nameOf)}, ${pyArg(second, nameOf)})`;
      return `${qualified(node.target)}(${callArgs(node, nameOf)})`;
    }
  }
}

/** Statement(s) for a node: in-place operator forms (`x += y`) keep their meaning by rebinding. */
export function pyStatement(node: GraphNode, nameOf: NameOf): string {
  // One op to the planner, several as the reference wrote them (plan/written-layernorm.ts): those, in order.
  if (node.written) return node.written.map((n) => pyStatement(n, nameOf)).join("\n");
  const infix = INFIX[node.target];
  const [first, second] = node.args;
  if (node.kind === "call_function" && infix && AUGMENTED.has(infix) && first && second) {
    const target = pyArg(first, nameOf);
    return `${target} ${infix} ${pyArg(second, nameOf)}\n${nameOf(node.id)} = ${target}`;
  }
  return `${nameOf(node.id)} = ${pyCall(node, nameOf)}`;
}

/** The top-level comma-separated parts of a parameter list (a default `(1, 2)` or `Tuple[int, int]` is one). */
function parameterParts(signature: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote = "";
  let current = "";
  for (const ch of signature) {
    if (quote) quote = ch === quote ? "" : quote;
    else if (ch === '"' || ch === "'") quote = ch;
    else if ("([{".includes(ch)) depth++;
    else if (")]}".includes(ch)) depth--;
    if (ch === "," && depth === 0 && !quote) {
      parts.push(current);
      current = "";
    } else current += ch;
  }
  return [...parts, current];
}

/** The arguments that pass forward's own parameters on to another method of the same signature: keyword-only
 * parameters (after `*` or `*args`) by keyword, `*args` and `**kwargs` unpacked. */
export function forwardCallArgs(signature: string): string[] {
  const args: string[] = [];
  let keywordOnly = false;
  for (const part of parameterParts(signature).slice(1)) {
    const name = part.split("=")[0]?.split(":")[0]?.trim() ?? "";
    if (!name || name === "/") continue;
    if (name === "*") keywordOnly = true;
    else if (name.startsWith("**")) args.push(name);
    else if (name.startsWith("*")) {
      args.push(name);
      keywordOnly = true;
    } else args.push(keywordOnly ? `${name}=${name}` : name);
  }
  return args;
}
