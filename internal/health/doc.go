// Package health judges each GPU fit or unfit for work: a policy applied to
// enriched snapshots and their XID history, giving every GPU a verdict (ok,
// warn, fail or unknown), the checks that decided it and one line a person
// understands.
//
// It is a stage after attribution: the Judge sees every snapshot of a
// pipeline once, in order, keeps what it must remember between them (XIDs
// seen, links that were up, how long a slowdown has lasted) and hands its
// verdicts on in Snapshot.Health. It never calls NVML or a socket, and it
// never acts on a verdict: draining a node is a command's job.
//
// A verdict remembers its cause until the condition clears, and each check
// says what clears it (Checks): a GPU reset or a reboot for an XID, a
// driver reload for the volatile ECC counter, the remap itself for a
// pending remap. A GPU that did not answer is unknown, never failed.
package health
