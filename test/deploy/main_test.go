package deploy

import (
	"os"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testenv"
)

var gpuwatchBin string

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithGpuwatch(m, "deploy", &gpuwatchBin))
}
