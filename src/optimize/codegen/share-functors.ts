/**
 * Regions that compute the same thing (every BatchNorm → ReLU6 of a MobileNet, say) generate the same functor
 * structs under different names, and every launcher then instantiates the kernel templates again for its own
 * functors: nvcc compiles the same kernels once per region, which makes a deep network's one translation unit
 * take minutes. Here a functor whose body matches an earlier one's — up to its own name and the names of its
 * locals — is dropped, and its region's launchers use the earlier functor: the same template arguments, so
 * one instantiation. Launcher and host symbols keep their per-region names.
 */

/** A functor definition as `functor()` in region.ts writes it: `struct Name {` … a line `};`. */
const FUNCTOR = /^struct (Kf\w+) \{\n[\s\S]*?^\};\n?/gm;

/** The generated code's locals are `t_<node id>` (region.ts pointwiseLines). */
const LOCAL = /\bt_\w+/g;

function canonical(definition: string, name: string): string {
  const locals = new Map<string, string>();
  return definition.replace(`struct ${name} {`, "struct _ {").replace(LOCAL, (local) => {
    let renamed = locals.get(local);
    if (renamed === undefined) {
      renamed = `t_${locals.size}`;
      locals.set(local, renamed);
    }
    return renamed;
  });
}

function renameAll(code: string, renames: Map<string, string>): string {
  if (renames.size === 0) return code;
  const names = [...renames.keys()].sort((a, b) => b.length - a.length);
  return code.replace(new RegExp(`\\b(?:${names.join("|")})\\b`, "g"), (name) => renames.get(name) ?? name);
}

/** The regions' CUDA with each repeated functor replaced by its first definition (in region order). */
export function shareIdenticalFunctors(regionCuda: string[]): string[] {
  const firstByBody = new Map<string, string>();
  return regionCuda.map((code) => {
    const renames = new Map<string, string>();
    const kept = code.replace(FUNCTOR, (definition: string, name: string) => {
      // A functor naming an earlier functor of its region is compared with that one already shared.
      const key = canonical(renameAll(definition, renames), name);
      const first = firstByBody.get(key);
      if (first !== undefined) {
        renames.set(name, first);
        return "";
      }
      firstByBody.set(key, name);
      return definition;
    });
    return renameAll(kept, renames);
  });
}
