//go:build !linux

package doctor

// checkCgroup has nothing to check: cgroups are Linux's.
func checkCgroup(Env) []Result {
	return []Result{skip("cgroups", "cgroups are Linux's")}
}
