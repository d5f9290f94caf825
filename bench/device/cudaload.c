// cudaload keeps one GPU busy for a while, so that gpuwatch can be compared
// with nvidia-smi on a GPU under load (utilization, GPM, power, and the
// process with its memory and owner). It needs no CUDA toolkit: it loads
// the driver's libcuda.so.1 at run time and JIT-compiles a small PTX
// kernel, so it builds with plain gcc on the development machine.
//
//   gcc -O2 -o cudaload bench/device/cudaload.c -ldl
//   ./cudaload SECONDS MEMORY_MIB [DEVICE [DUTY PERIOD_S]]
//
// The kernel spins on fused multiply-adds in every thread of enough
// blocks to fill every SM; launches are repeated until SECONDS have passed.
// With DUTY (0-1) and PERIOD_S, the load is busy for the first DUTY of
// every PERIOD_S seconds and idle for the rest: a square wave, so that a
// process's utilization changes over time in a known way (the accounting's
// device check, bench/device/accounting.sh). It prints its PID, and at the
// end the seconds its launches took (launch to synchronize, which under
// time-slicing includes waiting for another process's kernels).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef unsigned long long CUdeviceptr;

#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16

static const char ptx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    ".visible .entry spin(.param .u64 out, .param .u32 iters)\n"
    "{\n"
    "  .reg .pred p;\n"
    "  .reg .b32 r<6>;\n"
    "  .reg .f32 f<3>;\n"
    "  .reg .b64 rd<4>;\n"
    "  ld.param.u64 rd1, [out];\n"
    "  ld.param.u32 r1, [iters];\n"
    "  mov.u32 r2, %tid.x;\n"
    "  cvt.rn.f32.u32 f1, r2;\n"
    "  mov.f32 f2, 0f3F7FFFFE;\n"
    "  mov.u32 r3, 0;\n"
    "LOOP:\n"
    "  fma.rn.f32 f1, f1, f2, f2;\n"
    "  add.u32 r3, r3, 1;\n"
    "  setp.lt.u32 p, r3, r1;\n"
    "  @p bra LOOP;\n"
    "  mov.u32 r4, %ctaid.x;\n"
    "  mov.u32 r5, %ntid.x;\n"
    "  mad.lo.u32 r4, r4, r5, r2;\n"
    "  mul.wide.u32 rd2, r4, 4;\n"
    "  cvta.to.global.u64 rd3, rd1;\n"
    "  add.u64 rd3, rd3, rd2;\n"
    "  st.global.f32 [rd3], f1;\n"
    "  ret;\n"
    "}\n";

#define LOAD(name) \
  name##_t name = (name##_t)dlsym(lib, #name); \
  if (!name) { fprintf(stderr, "cudaload: libcuda.so.1 lacks %s\n", #name); return 1; }
#define CHECK(call) \
  do { CUresult rc = (call); \
       if (rc != 0) { fprintf(stderr, "cudaload: %s failed: %d\n", #call, rc); return 1; } } while (0)

typedef CUresult (*cuInit_t)(unsigned);
typedef CUresult (*cuDeviceGet_t)(CUdevice *, int);
typedef CUresult (*cuDeviceGetAttribute_t)(int *, int, CUdevice);
typedef CUresult (*cuCtxCreate_v2_t)(CUcontext *, unsigned, CUdevice);
typedef CUresult (*cuModuleLoadData_t)(CUmodule *, const void *);
typedef CUresult (*cuModuleGetFunction_t)(CUfunction *, CUmodule, const char *);
typedef CUresult (*cuMemAlloc_v2_t)(CUdeviceptr *, size_t);
typedef CUresult (*cuMemsetD8_v2_t)(CUdeviceptr, unsigned char, size_t);
typedef CUresult (*cuLaunchKernel_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, unsigned, void *, void **, void **);
typedef CUresult (*cuCtxSynchronize_t)(void);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: cudaload SECONDS MEMORY_MIB [DEVICE [DUTY PERIOD_S]]\n");
    return 2;
  }
  double seconds = atof(argv[1]);
  size_t mib = strtoull(argv[2], NULL, 10);
  int ordinal = argc > 3 ? atoi(argv[3]) : 0;
  double duty = argc > 5 ? atof(argv[4]) : 1, period = argc > 5 ? atof(argv[5]) : 1;
  if (duty <= 0 || duty > 1 || period <= 0) {
    fprintf(stderr, "cudaload: DUTY must be in (0, 1] and PERIOD_S positive\n");
    return 2;
  }

  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "cudaload: %s\n", dlerror());
    return 1;
  }
  LOAD(cuInit) LOAD(cuDeviceGet) LOAD(cuDeviceGetAttribute) LOAD(cuCtxCreate_v2)
  LOAD(cuModuleLoadData) LOAD(cuModuleGetFunction) LOAD(cuMemAlloc_v2) LOAD(cuMemsetD8_v2)
  LOAD(cuLaunchKernel) LOAD(cuCtxSynchronize)

  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  int sms = 0;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, ordinal));
  CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CHECK(cuCtxCreate_v2(&ctx, 0, dev));
  CHECK(cuModuleLoadData(&mod, ptx));
  CHECK(cuModuleGetFunction(&fn, mod, "spin"));

  // The memory is touched so that it is really allocated on the GPU.
  CUdeviceptr ballast = 0;
  if (mib > 0) {
    CHECK(cuMemAlloc_v2(&ballast, mib << 20));
    CHECK(cuMemsetD8_v2(ballast, 1, mib << 20));
  }
  unsigned threads = 256, blocks = (unsigned)sms * 8;
  CUdeviceptr out;
  CHECK(cuMemAlloc_v2(&out, (size_t)threads * blocks * sizeof(float)));

  unsigned iters = 1u << 20;
  if (duty < 1) iters = 1u << 16; /* short launches, so that a busy phase ends on time */
  void *args[] = {&out, &iters};
  double start = now(), busy = 0;
  long launches = 0;
  printf("cudaload: pid %d, device %d, %d SMs, %zu MiB held, %u blocks of %u threads, %.0f s, busy %.2f of every %.1f s\n",
         (int)getpid(), ordinal, sms, mib, blocks, threads, seconds, duty, period);
  fflush(stdout);
  for (double t = now(); t - start < seconds; t = now()) {
    double phase = (t - start) - period * (long)((t - start) / period);
    if (phase >= duty * period) {
      double idle = period - phase; /* idle until the next period */
      struct timespec ts = {(time_t)idle, (long)((idle - (time_t)idle) * 1e9)};
      nanosleep(&ts, NULL);
      continue;
    }
    CHECK(cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, NULL, args, NULL));
    CHECK(cuCtxSynchronize());
    busy += now() - t;
    launches++;
  }
  printf("cudaload: %ld launches in %.1f s, %.1f s of them launching\n", launches, now() - start, busy);
  return 0;
}
