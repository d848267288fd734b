// The JSON lines between the CLI and python/kforge_worker/ray_driver.py. The CLI writes one RayTask per
// evaluation to the driver's stdin; the driver writes RayDriverMessages to stdout as Ray tasks finish.
// `npm run schemas` exports both for the Python tests.
import { z } from "zod";
import { EvalRequest } from "../worker/protocol.ts";

export const RayTask = z.object({
  id: z.string(),
  request: EvalRequest,
  /** The files travel with the task: a node of the cluster may not share this host's filesystem. */
  problemSource: z.string(),
  candidateSource: z.string(),
  timeoutSeconds: z.number().positive(),
  /** The worker's secret trial seed (KFORGE_SECRET_SEED of the process the Ray task spawns). */
  secret: z.string(),
});
export type RayTask = z.infer<typeof RayTask>;

/** What became of one worker process run by a Ray task: its protocol lines and how it ended. */
export const RayOutcome = z.object({
  type: z.literal("outcome"),
  id: z.string(),
  /** The node (host name) the task ran on. */
  node: z.string(),
  stdout: z.array(z.string()),
  stderrTail: z.array(z.string()),
  timedOut: z.boolean(),
  leftovers: z.boolean(),
  signal: z.string().nullable(),
  exitCode: z.number().int().nullable(),
  seconds: z.number(),
  /** Ray itself failed the task (a node died, the worker could not start): nothing the candidate did. */
  rayError: z.string().nullable(),
  /** The judge's channel as the task (the CLI's part on that node) read it: the nonce it wrote into the socket and
   * the lines the reference process wrote (src/worker/judge.ts). Absent from older drivers and without one. */
  judge: z
    .object({ nonce: z.string(), lines: z.array(z.string()) })
    .nullable()
    .optional(),
});
export type RayOutcome = z.infer<typeof RayOutcome>;

export const RayReady = z.object({
  type: z.literal("ready"),
  /** ray.cluster_resources(): CPU, GPU, memory... */
  resources: z.record(z.string(), z.number()),
});

export const RayFatal = z.object({ type: z.literal("fatal"), message: z.string() });

export const RayDriverMessage = z.discriminatedUnion("type", [RayReady, RayOutcome, RayFatal]);
export type RayDriverMessage = z.infer<typeof RayDriverMessage>;
