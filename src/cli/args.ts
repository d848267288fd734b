// Option parsers shared by the commands: each rejects bad values with commander's one-line error.
import { InvalidArgumentError } from "commander";

function numberParser(test: (n: number) => boolean, expected: string) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !test(n)) throw new InvalidArgumentError(`expected ${expected}`);
    return n;
  };
}

export const positiveInt = numberParser((n) => Number.isInteger(n) && n > 0, "a positive integer");
export const nonNegativeInt = numberParser((n) => Number.isInteger(n) && n >= 0, "a non-negative integer");
export const positiveNumber = numberParser((n) => Number.isFinite(n) && n > 0, "a positive number");
