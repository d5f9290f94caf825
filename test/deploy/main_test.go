package deploy

import (
	"fmt"
	"os"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

var gpuwatchBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	bin, cleanup, err := testenv.GpuwatchBinary("deploy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	gpuwatchBin = bin
	return m.Run()
}
