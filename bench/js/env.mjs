// What every bench script shares: the bench passes the node and the owner's
// session in EB_* variables.

/** The value of the bench's variable k; a missing one is an error. */
export const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`missing ${k}`);
  return v;
};

/** A localStorage stand-in that holds the owner's session (EB_TOKEN) and keeps nothing else. */
export function ownerStorage() {
  const session = JSON.stringify({ token: env('EB_TOKEN'), user: null });
  return { getItem: () => session, setItem() {}, removeItem() {} };
}
