package report

import (
	"math"
	"strconv"
)

// A report is read by adding its rows: the figures people see are printed
// with enough digits for the range (or in GPU-minutes where GPU-hours
// would all be 0.0), and each summed column's rows are rounded so that
// they add up to the totals row exactly as printed. CSV and JSON keep full
// precision in base units (hours, kWh).

// precision is how one report prints its GPU-hours and energy.
type precision struct {
	// hourUnit is "GPU-h" or "GPU-min"; hourScale turns hours into it.
	hourUnit     string
	hourScale    float64
	hourDecimals int
	kwhDecimals  int
}

// significantDigits is how many digits the largest figure of a column
// shows at least.
const significantDigits = 3

// precisionOf chooses the unit and digits from the report's totals: a
// report whose total held time is under one GPU-hour speaks in GPU-minutes.
func precisionOf(r *Report) precision {
	p := precision{hourUnit: "GPU-h", hourScale: 1}
	largest := r.Totals.AllocatedGPUHours
	if largest < 1 {
		p.hourUnit, p.hourScale = "GPU-min", 60
	}
	p.hourDecimals = decimalsFor(largest*p.hourScale, 1, 4)
	energy := 0.0
	if r.Totals.EnergyKWhSummed != nil {
		energy = *r.Totals.EnergyKWhSummed
	}
	if r.Fleet.EnergyKWhSummed != nil {
		energy = math.Max(energy, *r.Fleet.EnergyKWhSummed)
	}
	p.kwhDecimals = decimalsFor(energy, 2, 6)
	return p
}

// decimalsFor is the number of decimals that shows largest with
// significantDigits digits, within [least, most].
func decimalsFor(largest float64, least, most int) int {
	if largest <= 0 || math.IsNaN(largest) || math.IsInf(largest, 0) {
		return least
	}
	d := significantDigits - int(math.Floor(math.Log10(largest))) - 1
	return max(least, min(most, d))
}

func (p precision) hours(v float64) string {
	return strconv.FormatFloat(v*p.hourScale, 'f', p.hourDecimals, 64)
}

func (p precision) kwh(v float64) string {
	return strconv.FormatFloat(v, 'f', p.kwhDecimals, 64)
}

// roundedColumn rounds a summed column's row values to decimals so that
// they add up to the rounded total (the largest remainder method): each
// printed row is its value rounded up or down, and the printed rows sum to
// the printed total. Absent values (ok false) stay absent; where any row
// is absent the total still sums the present ones.
func roundedColumn(values []float64, present []bool, decimals int) (rows []float64, total float64) {
	unit := math.Pow(10, -float64(decimals))
	rows = make([]float64, len(values))
	sum := 0.0
	floors := 0.0
	type rest struct {
		i    int
		frac float64
	}
	var rests []rest
	for i, v := range values {
		if !present[i] {
			continue
		}
		sum += v
		f := math.Floor(v/unit + 1e-9)
		rows[i] = f
		floors += f
		rests = append(rests, rest{i, v/unit - f})
	}
	units := math.Round(sum / unit)
	// Hand out the units the floors left over, largest remainder first.
	for left := int(units - floors); left > 0 && len(rests) > 0; left-- {
		best := 0
		for j, r := range rests {
			if r.frac > rests[best].frac {
				best = j
			}
		}
		rows[rests[best].i]++
		rests = append(rests[:best], rests[best+1:]...)
	}
	for i := range rows {
		rows[i] *= unit
	}
	return rows, units * unit
}
