package jobs

// crashPoint is called at each point where the records' state on disk
// changes: "ended" (jobs ended, nothing written yet), "journaled" (a
// record written, the checkpoint not yet), "checkpointed". It does
// nothing; the tests' helper process replaces it with a SIGKILL of itself
// at the point it was told, to prove that no record is lost or written
// twice whichever point a crash comes at.
var crashPoint = func(string) {}
