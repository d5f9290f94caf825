package deploycheck

// PendingMetrics are the metrics agreed in NAMES.md that other branches are
// adding to the exporter right now; the shipped rules and dashboards already
// use them. Load fails once one of them is in the catalog, so that whoever
// merges that branch removes it here: the list only ever shrinks, and is
// empty (then deleted) once every branch is in.
var PendingMetrics = map[string][]string{
	"gpu_gpm_graphics_active_ratio":            {"gpu", "uuid"},
	"gpu_gpm_pcie_transmit_bytes_per_second":   {"gpu", "uuid"},
	"gpu_gpm_pcie_receive_bytes_per_second":    {"gpu", "uuid"},
	"gpu_gpm_nvlink_transmit_bytes_per_second": {"gpu", "uuid"},
	"gpu_gpm_nvlink_receive_bytes_per_second":  {"gpu", "uuid"},
	"gpu_power_limit_default_watts":            {"gpu", "uuid"},
	"gpu_power_limit_min_watts":                {"gpu", "uuid"},
	"gpu_power_limit_max_watts":                {"gpu", "uuid"},
	"gpu_mig_mode_pending":                     {"gpu", "uuid"},
	"gpuwatch_driver_limited_group":            {"group", "reason"},
	"gpuwatch_driver_info":                     {"version", "branch", "library"},
}
