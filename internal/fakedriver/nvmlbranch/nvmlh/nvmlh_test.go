package nvmlh

import (
	"strings"
	"testing"
)

const sample = `
#define NVML_FI_DEV_ECC_CURRENT 1 //!< Current ECC mode
#define NVML_FI_DEV_PCIE_COUNT_TX_BYTES   197 /* wraps */
#define NVML_FI_MAX 198
nvmlReturn_t DECLDIR nvmlInit_v2(void);
const DECLDIR char* nvmlErrorString(nvmlReturn_t result);
DEPRECATED(13.0) nvmlReturn_t DECLDIR nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp);
nvmlReturn_t DECLDIR nvmlDeviceGetMinMaxFanSpeed(nvmlDevice_t device, unsigned int * minSpeed,
                                                 unsigned int * maxSpeed);
/* nvmlReturn_t DECLDIR nvmlCommentedOut(void); */
nvmlReturn_t DECLDIR nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t DECLDIR nvmlDeviceGetRetiredPages(nvmlDevice_t device, unsigned long long addresses[]);
`

func TestParseHeader(t *testing.T) {
	h, err := ParseHeader([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range h.Functions {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, " "); got != "nvmlDeviceGetHandleByUUID nvmlDeviceGetMinMaxFanSpeed nvmlDeviceGetRetiredPages nvmlDeviceGetTemperature nvmlErrorString nvmlInit_v2" {
		t.Errorf("functions: %s", got)
	}
	fan, _ := h.Function("nvmlDeviceGetMinMaxFanSpeed")
	if len(fan.Params) != 3 || fan.Params[2] != (Param{Type: "unsigned int *", Name: "maxSpeed"}) {
		t.Errorf("multi-line declaration: %+v", fan.Params)
	}
	uuid, _ := h.Function("nvmlDeviceGetHandleByUUID")
	if uuid.Params[0] != (Param{Type: "const char *", Name: "uuid"}) {
		t.Errorf("const char *: %+v", uuid.Params[0])
	}
	pages, _ := h.Function("nvmlDeviceGetRetiredPages")
	if pages.Params[1].Type != "unsigned long long *" {
		t.Errorf("array parameter: %+v", pages.Params[1])
	}
	if es, _ := h.Function("nvmlErrorString"); es.Returns != "const char*" {
		t.Errorf("nvmlErrorString returns %q", es.Returns)
	}
	if len(h.Fields) != 2 || h.Fields[1] != (Field{"NVML_FI_DEV_PCIE_COUNT_TX_BYTES", 197}) || h.FieldMax != 198 {
		t.Errorf("fields %+v max %d", h.Fields, h.FieldMax)
	}
}

func TestParseHeaderRejectsWhatItCannotRead(t *testing.T) {
	for _, bad := range []string{
		"#define NVML_FI_MAX 2\n#define NVML_FI_A 1\nnvmlReturn_t DECLDIR nvmlX(int (*cb)(void));\n",
		"#define NVML_FI_MAX 2\n#define NVML_FI_A 1\nnvmlReturn_t DECLDIR nvmlX(int a\n",
		"int main(void);\n",
	} {
		if _, err := ParseHeader([]byte(bad)); err == nil {
			t.Errorf("ParseHeader(%q) succeeded", bad)
		}
	}
}
