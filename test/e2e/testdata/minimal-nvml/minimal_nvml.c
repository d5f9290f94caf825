/*
 * A libnvidia-ml.so.1 stripped down to fifteen functions: init, shutdown,
 * error string, device count, handle by index, UUID, name, temperature,
 * power, memory (v1 only), driver and NVML version. Two GPUs with fixed
 * readings. gpuwatch must serve these readings through the unmodified
 * go-nvml path (dlopen, cgo) and never call anything else: a call to a
 * function this library lacks ends the process with "symbol lookup error".
 *
 * Built with -DBARE it also lacks nvmlShutdown and nvmlErrorString (which
 * go-nvml calls without looking it up, to render any error), and GPU 1's
 * power reading fails with NVML_ERROR_UNKNOWN, so that an error must be
 * rendered without it.
 *
 * The declarations follow nvml.h's ABI (go-nvml v0.13.3-0); only what the
 * functions need is declared, so the file builds without NVIDIA's headers.
 */
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

enum { SUCCESS = 0, ERROR_UNINITIALIZED = 1, ERROR_INVALID_ARGUMENT = 2,
       ERROR_INSUFFICIENT_SIZE = 7, ERROR_UNKNOWN = 999 };

#define GPUS 2
static struct nvmlDevice_st { int index; } devices[GPUS] = {{0}, {1}};
static int initialized;

static nvmlReturn_t copy(char *dst, unsigned int length, const char *src) {
	if (dst == NULL) return ERROR_INVALID_ARGUMENT;
	if (strlen(src) + 1 > length) return ERROR_INSUFFICIENT_SIZE;
	strcpy(dst, src);
	return SUCCESS;
}

static int valid(nvmlDevice_t d) {
	return d == &devices[0] || d == &devices[1];
}

nvmlReturn_t nvmlInit_v2(void) { initialized++; return SUCCESS; }
nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

#ifndef BARE
nvmlReturn_t nvmlShutdown(void) {
	if (!initialized) return ERROR_UNINITIALIZED;
	initialized--;
	return SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r) {
	switch (r) {
	case SUCCESS: return "Success";
	case ERROR_UNINITIALIZED: return "Uninitialized";
	case ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	}
	return "Unknown Error";
}
#endif

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
	if (!initialized) return ERROR_UNINITIALIZED;
	if (count == NULL) return ERROR_INVALID_ARGUMENT;
	*count = GPUS;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
	if (!initialized) return ERROR_UNINITIALIZED;
	if (index >= GPUS || device == NULL) return ERROR_INVALID_ARGUMENT;
	*device = &devices[index];
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
	char buf[96];
	if (!valid(d)) return ERROR_INVALID_ARGUMENT;
	snprintf(buf, sizeof buf, "GPU-00000000-1111-2222-3333-00000000000%d", d->index);
	return copy(uuid, length, buf);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
	if (!valid(d)) return ERROR_INVALID_ARGUMENT;
	return copy(name, length, "NVIDIA Minimal Test GPU");
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp) {
	if (!valid(d) || sensor != 0 || temp == NULL) return ERROR_INVALID_ARGUMENT;
	*temp = 41 + d->index;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *milliwatts) {
	if (!valid(d) || milliwatts == NULL) return ERROR_INVALID_ARGUMENT;
#ifdef BARE
	if (d->index == 1) return ERROR_UNKNOWN;
#endif
	*milliwatts = 123456 + 1000 * d->index;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
	if (!valid(d) || m == NULL) return ERROR_INVALID_ARGUMENT;
	m->total = 80ULL << 30;
	m->used = (1ULL + d->index) << 30;
	m->free = m->total - m->used;
	return SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
	return copy(version, length, "470.256.02");
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
	return copy(version, length, "11.470.256.02");
}
