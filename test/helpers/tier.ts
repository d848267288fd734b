// CI's default run must stay under its 20 minutes on two cores. A test given `heavy` (an end-to-end variant whose
// behaviour a default test or a unit test also exercises) is skipped there and runs with KFORGE_TEST_HEAVY=1:
// `npm run test:heavy` runs every test of both languages, the heavy ones included.
export const HEAVY = process.env.KFORGE_TEST_HEAVY === "1";

export const heavy: { skip: string | false } = {
  skip: HEAVY ? false : "heavy: runs under KFORGE_TEST_HEAVY=1 (npm run test:heavy)",
};
