// C++ float literals for the generated kernels' constants: its own module so that the op tables (pointwise.ts,
// reduce.ts, normalize.ts) can import it in any order (pointwise.ts reads REDUCTIONS while it loads).
/** C++ float literal for a JSON number (keeps integers readable: 2 -> "2.f"). */
export function floatLiteral(value: number): string {
  if (Number.isNaN(value)) return "__int_as_float(0x7fffffff)";
  if (value === Number.POSITIVE_INFINITY) return "__int_as_float(0x7f800000)";
  if (value === Number.NEGATIVE_INFINITY) return "__int_as_float(0xff800000)";
  const text = Number.isInteger(value) && Math.abs(value) < 1e15 ? `${value}.` : `${value}`;
  return `${text.includes("e") && !text.includes(".") ? text.replace("e", ".e") : text}f`;
}
